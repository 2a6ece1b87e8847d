"""Restore: a past version written again as the note's newest, by compare-and-swap.

What an agent does with two calls (read ``uri@N`` in full, write it back with the current
version as ``expect_version``) in one step for an operator: the kept version's content,
digest, sources and confidence become a new version; a writer that got in first makes it a
``conflict``, and nothing is written.
"""

from __future__ import annotations

import orjson

from .._errors import InvalidArgument, NotFound
from ..connection import _key_names as keys
from ..connection._board_client import BoardClient
from ..connection._field_names import FIELD
from ..notes._addresses import Address
from ..notes._tables import parse_tsv
from ..reads._live import note_content
from ..requests import UpdateState


async def restore_request(client: BoardClient, address: Address) -> UpdateState:
    """The write that makes ``address`` (a version's address) the note's newest version."""
    if address.version is None or address.start is not None:
        raise InvalidArgument(
            f"restore takes a past version's address, like {address.note.uri}@3",
            argument="uri",
        )
    ws, member = address.workspace, address.member
    async with client.operation():
        current = await client.redis.hget(keys.note(ws, member), FIELD.version)
        if current is None:
            raise NotFound(f"no note at {address.note.uri}", uri=address.note.uri)
        if int(current) == address.version:
            raise InvalidArgument(
                f"{address.uri} is the current version: there is nothing to restore",
                argument="uri",
            )
        digest, sources, confidence = await client.redis.hmget(
            keys.version(ws, member, address.version),
            [FIELD.digest, FIELD.sources, FIELD.confidence],
        )
    if digest is None:
        raise NotFound(f"version {address.version} of {address.note.uri} is not kept")
    content = await note_content(client, address)
    args: dict[str, object] = {
        "uri": address.note.uri,
        "digest": digest.decode(),
        "expect_version": int(current),
        "sources": orjson.loads(sources) if sources else [],
    }
    if confidence:
        args["confidence"] = float(confidence)
    if content.kind == "table":
        table = parse_tsv(content.text)
        args["columns"], args["rows"] = list(table.columns), [list(r) for r in table.rows]
    else:
        args["body"] = content.text
    return UpdateState.parse(args)
