"""link_state: typed relationships between notes, queryable from both ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypedDict

from .._errors import NotFound
from ..connection import _key_names as keys
from ..connection._board_client import BoardClient
from ..connection._field_names import FIELD
from ..connection._tx import Gate, ReplicaWait, Transaction
from ._addresses import Address
from ._commit import queue_commit
from ._provenance import encode_record

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


class LinkResult(TypedDict, total=False):
    src: str
    rel: str
    linked: list[str]
    removed: list[str]
    warnings: list[str]


async def write_links(
    client: BoardClient,
    source: Address,
    rel: Relation,
    targets: list[Address],
    *,
    author: str,
    changelog_maxlen: int,
    max_retries: int,
    remove: bool = False,
    may_read: bool = True,
    gate: Gate | None = None,
    wait: ReplicaWait | None = None,
) -> LinkResult:
    """Add the links, each recording both ends' versions now, or with ``remove`` take them
    away; ``may_read`` says whether the caller may read the source's topic.

    A caller that may only write it is not told which of the links already existed (or did
    not, for a removal): the source's links are part of what a reader of that topic sees.
    Adding a link again records the versions again: it says the relation holds as they are
    now. A removal that names no existing link is ``not_found``, and writes nothing.
    """
    ws = source.workspace
    ends = (source, *targets)
    note_keys = [keys.note(ws, a.member) for a in ends]
    out_key = keys.links_out(ws, source.member)
    names = [f"{rel}\t{t.member}" for t in targets]
    # Each end's version, read under WATCH: a note deleted or written between this read and
    # EXEC makes the EXEC fail and the read run again, so no link points at a deleted note and
    # none records a version its end has already left.
    first_reads: list[tuple[Any, ...]] = [("HGET", key, FIELD.version) for key in note_keys]
    if remove:
        first_reads.append(("SMISMEMBER", out_key, *names))

    async def body(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], list[Any]]:
        versions = first[: len(note_keys)]
        missing = [a.uri for a, v in zip(ends, versions, strict=True) if v is None]
        if missing:
            raise NotFound(f"no note at {', '.join(missing)}", uris=missing)
        present = [bool(v) for v in first[len(note_keys)]] if remove else []
        if remove and not any(present):
            raise NotFound(
                f"{source.uri} has no {rel} link to {', '.join(t.uri for t in targets)}"
                if may_read
                else "no such link",
                hint='list the note\'s links with get_state(mode="fields", fields=["links"])',
            )
        tx.multi()
        at_key = keys.links_at(ws, source.member)
        if remove:
            tx.queue("SREM", out_key, *names)
            for target in targets:
                tx.queue("SREM", keys.links_in(ws, target.member), f"{rel}\t{source.member}")
            tx.queue("HDEL", at_key, *names)
        else:
            tx.queue("SADD", out_key, *names)
            for target in targets:
                tx.queue("SADD", keys.links_in(ws, target.member), f"{rel}\t{source.member}")
            source_version = int(versions[0])
            records = [
                part
                for name, version in zip(names, versions[1:], strict=True)
                for part in (name, encode_record(source_version, int(version)))
            ]
            tx.queue("HSET", at_key, *records)
        queue_commit(
            tx,
            workspace=ws,
            topic=source.topic,
            member=source.member,
            kind="",
            op="unlink" if remove else "link",
            uri=source.uri,
            version=0,
            author=author,
            changelog_maxlen=changelog_maxlen,
        )
        return lambda replies: [*replies, present]

    replies = await client.transaction(
        [*note_keys, out_key] if remove else note_keys,
        body,
        max_retries=max_retries,
        first_reads=first_reads,
        gate=gate,
        wait=wait,
    )
    changed = int(replies[0])
    if remove:
        present = replies[-1]
        gone = [t.uri for t, was in zip(targets, present, strict=True) if was]
        warnings = (
            []
            if changed == len(targets) or not may_read
            else [f"{len(targets) - changed} of these links did not exist"]
        )
        return {"src": source.uri, "rel": rel, "linked": [], "removed": gone, "warnings": warnings}
    warnings = (
        []
        if changed == len(targets) or not may_read
        else [f"{len(targets) - changed} of these links already existed"]
    )
    return {"src": source.uri, "rel": rel, "linked": [t.uri for t in targets], "warnings": warnings}


def decode_links(
    workspace: str,
    outgoing: set[bytes],
    incoming: set[bytes],
    topic_shown: Callable[[str], bool] | None = None,
) -> list[dict[str, str]]:
    """Both directions as ``{rel, to}`` / ``{rel, from}`` items, sorted for stable output;
    with ``topic_shown``, only the links whose other end is in a topic it admits (asked once
    per topic)."""
    prefix = f"bb://{workspace}/"
    shown: dict[str, bool] = {}
    out: list[dict[str, str]] = []
    for direction, raws in (("to", outgoing), ("from", incoming)):
        for raw in sorted(raws):
            rel, member = raw.decode().split("\t", 1)
            if topic_shown is not None:
                topic = member.split("/", 1)[0]
                admitted = shown.get(topic)
                if admitted is None:
                    admitted = shown[topic] = topic_shown(topic)
                if not admitted:
                    continue
            out.append({"rel": rel, direction: prefix + member})
    return out
