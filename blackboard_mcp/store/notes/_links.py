"""link_state: typed relationships between notes, queryable from both ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypedDict

import redis.asyncio as aioredis

from .._errors import NotFound
from ..connection import _keys as keys
from ..connection._tx import Gate, ReplicaWait, Transaction, run_transaction
from ._addresses import Address
from ._commit import queue_commit

Relation = Literal[
    "depends_on", "derived_from", "supersedes", "refines", "cites", "part_of", "contradicts"
]
RELATIONS: tuple[Relation, ...] = (
    "depends_on",
    "derived_from",
    "supersedes",
    "refines",
    "cites",
    "part_of",
    "contradicts",
)
MAX_TARGETS = 64


class LinkResult(TypedDict):
    src: str
    rel: str
    linked: list[str]
    warnings: list[str]


async def write_links(
    client: aioredis.Redis[bytes],
    source: Address,
    rel: Relation,
    targets: list[Address],
    *,
    author: str,
    changelog_maxlen: int,
    max_retries: int,
    may_read: bool = True,
    gate: Gate | None = None,
    wait: ReplicaWait | None = None,
) -> LinkResult:
    """Add the links; ``may_read`` says whether the caller may read the source's topic.

    A caller that may only write it is not told which of the links already existed: the
    source's links are part of what a reader of that topic sees.
    """
    ws = source.workspace
    ends = (source, *targets)
    note_keys = [keys.note(ws, a.member) for a in ends]

    async def body(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], list[Any]]:
        # Under WATCH: a note deleted between this check and EXEC makes the EXEC fail and
        # the check run again, so no link is ever left pointing at a deleted note.
        if int(first[0]) < len(note_keys):
            check = client.pipeline(transaction=False)
            for key in note_keys:
                check.exists(key)
            exists = await check.execute()
            missing = [a.uri for a, e in zip(ends, exists, strict=True) if not e]
            raise NotFound(f"no note at {', '.join(missing) or source.uri}", uris=missing)
        tx.multi()
        tx.queue(
            "SADD", keys.links_out(ws, source.member), *[f"{rel}\t{t.member}" for t in targets]
        )
        for target in targets:
            tx.queue("SADD", keys.links_in(ws, target.member), f"{rel}\t{source.member}")
        queue_commit(
            tx,
            workspace=ws,
            topic=source.topic,
            member=source.member,
            kind="",
            op="link",
            uri=source.uri,
            version=0,
            author=author,
            changelog_maxlen=changelog_maxlen,
        )
        return lambda replies: replies

    replies = await run_transaction(
        client,
        note_keys,
        body,
        max_retries=max_retries,
        first_reads=[("EXISTS", *note_keys)],
        gate=gate,
        wait=wait,
    )
    added = int(replies[0])
    warnings = (
        []
        if added == len(targets) or not may_read
        else [f"{len(targets) - added} of these links already existed"]
    )
    return {"src": source.uri, "rel": rel, "linked": [t.uri for t in targets], "warnings": warnings}


def decode_links(
    workspace: str, outgoing: set[bytes], incoming: set[bytes]
) -> list[dict[str, str]]:
    """Both directions as ``{rel, to}`` / ``{rel, from}`` items, sorted for stable output."""
    out: list[dict[str, str]] = []
    for raw in sorted(outgoing):
        rel, member = raw.decode().split("\t", 1)
        out.append({"rel": rel, "to": f"bb://{workspace}/{member}"})
    for raw in sorted(incoming):
        rel, member = raw.decode().split("\t", 1)
        out.append({"rel": rel, "from": f"bb://{workspace}/{member}"})
    return out


_WARNED = (
    ("supersedes", "from", "is superseded by"),
    ("contradicts", "from", "is contradicted by"),
    ("contradicts", "to", "contradicts"),
)


def once_per_link(warnings: list[str]) -> list[str]:
    """The warnings, each link said once: when both ends of a ``contradicts`` link are in
    one answer, "A contradicts B" stays and "B is contradicted by A" goes."""
    said = set(warnings)
    kept = []
    for warning in warnings:
        # The phrases are _WARNED's: the inverse of "contradicts" seen from the other end.
        target, sep, source = warning.partition(" is contradicted by ")
        if sep and f"{source} contradicts {target}" in said:
            continue
        kept.append(warning)
    return kept


def link_warnings(uri: str, links: list[dict[str, str]]) -> list[str]:
    """What a reader must know: the note was superseded, or it is disputed.

    One warning per relation, naming one other note and counting the rest (the note's links
    name them all), so a note with 59 ``contradicts`` links costs one line, not 59.
    """
    warnings = []
    for rel, direction, verb in _WARNED:
        others = [link[direction] for link in links if link["rel"] == rel and direction in link]
        if len(others) == 1:
            warnings.append(f"{uri} {verb} {others[0]}")
        elif others:
            warnings.append(f"{uri} {verb} {others[0]} and {len(others) - 1} more")
    return warnings
