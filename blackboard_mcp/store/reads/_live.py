"""The change log read as a live feed, and the reads that serve notes as resources.

A feed is a blocking XREAD of one workspace's change stream on a connection of its own:
a read blocked for seconds must not hold one of the pool's connections, which tool calls
wait for. Entries carry what the log already holds (seq, op, uri, version, author, time);
who may see an entry is the caller's business (the store knows nothing of tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis

from .._errors import Contended, NotFound
from ..connection import _key_names as keys
from ..connection._board_client import BoardClient
from ..connection._field_names import FIELD
from ..connection._redis_errors import mapped_redis_errors
from ..notes._addresses import Address, is_valid_name
from ._views import READ_ATTEMPTS, Readable


@dataclass(frozen=True)
class Change:
    """One committed write, as the change log recorded it."""

    workspace: str
    topic: str
    seq: int
    op: str
    uri: str
    version: int
    author: str
    at_ms: int


@dataclass(frozen=True)
class NoteContent:
    """A note's whole content: text, or a table as tab-separated values."""

    uri: str
    kind: str
    text: str
    version: int


def _change(workspace: str, fields: dict[bytes, bytes]) -> Change:
    f = {k.decode(): v.decode() for k, v in fields.items()}
    uri = f["uri"]
    # Logged addresses were validated when written: bb://<workspace>/<topic>/<path>.
    return Change(
        workspace=workspace,
        topic=uri.split("/", 4)[3],
        seq=int(f["seq"]),
        op=f["op"],
        uri=uri,
        version=int(f["version"]),
        author=f["author"],
        at_ms=int(f["at"]),
    )


class ChangeFeed:
    """Blocking reads of one workspace's change log, from the moment the feed opens."""

    def __init__(
        self, client: aioredis.Redis[bytes], workspace: str, *, timeout_seconds: float
    ) -> None:
        self._client = client
        self._timeout_seconds = timeout_seconds
        self._workspace = workspace
        self._key = keys.changelog(workspace)
        self._position = "$"

    @property
    def workspace(self) -> str:
        return self._workspace

    async def start_now(self) -> None:
        """Start the feed after the log's newest entry, so the caller can promise that
        every write committed from now on is read."""
        async with mapped_redis_errors(self._timeout_seconds):
            newest = await self._client.xrevrange(self._key, count=1)
        self._position = newest[0][0].decode() if newest else "0-0"

    def continue_from(self, other: ChangeFeed) -> None:
        """Read on from where ``other`` (a feed of the same workspace elsewhere) stopped.

        Entry ids are copied to replicas with the entries, so a feed reopened on a promoted
        replica or on a slot's new primary misses nothing that survived the move."""
        self._position = other._position

    async def next(self, *, block_ms: int, count: int = 512) -> list[Change]:
        """The entries written since the last call (or the feed's start), waiting up to
        ``block_ms`` for one; an empty list when none came.

        The wait is held to half an operation's deadline (BB_REDIS_TIMEOUT_SECONDS): an idle
        board answers an empty read well before the deadline would call Redis unresponsive.
        """
        block = max(1, min(block_ms, int(self._timeout_seconds * 500)))
        async with mapped_redis_errors(self._timeout_seconds):
            reply = await self._client.xread({self._key: self._position}, count=count, block=block)
        out: list[Change] = []
        for _stream, entries in reply or ():
            for entry_id, fields in entries:
                self._position = entry_id.decode()
                out.append(_change(self._workspace, fields))
        return out

    async def close(self) -> None:
        # The client owns its one connection (BoardClient.own_connection): closed with it.
        await self._client.aclose()  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8


def open_feed(client: BoardClient, workspace: str) -> ChangeFeed:
    """A feed on a connection of its own to the same Redis as ``client``; the read blocks
    by design (XREAD's BLOCK bounds it), so it has no socket timeout."""
    return ChangeFeed(client.own_connection(), workspace, timeout_seconds=client.timeout_seconds)


async def readable_topics(
    client: BoardClient, workspace: str, readable: Readable
) -> list[tuple[str, int]]:
    """The workspace's topics the reader may read, each with its number of notes.

    The topic set and one ZCARD per topic: never a scan of the notes.
    """
    async with client.operation():
        members = await client.redis.smembers(keys.topics(workspace))
        topics = sorted(
            t for t in (m.decode() for m in members) if is_valid_name(t) and readable(t)
        )
        pipe = client.redis.pipeline(transaction=False)
        for topic in topics:
            pipe.zcard(keys.by_name(workspace, topic))
        counts = await pipe.execute() if topics else []
    return [(t, int(n)) for t, n in zip(topics, counts, strict=True) if n]


async def note_content(client: BoardClient, address: Address) -> NoteContent:
    """The note's whole content, an offloaded body fetched in full. The caller has checked
    that the topic may be read.

    The fields and an inline body come from one command, so they are of one version; a blob
    read in a second round trip can only have gone since (deleted once no version names it),
    which a short read shows, and the note is then read again."""
    key = keys.note(address.workspace, address.member)
    fields = [FIELD.kind, FIELD.version, FIELD.body, FIELD.blob, FIELD.size]
    async with client.operation():
        for _ in range(READ_ATTEMPTS):
            kind, version, body, blob, size = await client.redis.hmget(key, fields)
            if (
                kind is not None
                and address.version is not None
                and int(version or 0) != address.version
            ):
                # A past version: its kept copy (store/notes/_history.py), if it is still kept.
                kept = keys.version(address.workspace, address.member, address.version)
                kind, version, body, blob, size = await client.redis.hmget(kept, fields)
            if kind is None:
                raise NotFound(f"no note at {address.uri}", uri=address.uri)
            if not blob:
                break
            # Up to the size read with it: an appended note's log blob may have grown since.
            length = int(size or 0)
            blob_key = keys.blob(address.workspace, blob.decode())
            body = await client.redis.getrange(blob_key, 0, length - 1)  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            if len(body or b"") == length:
                break
        else:
            raise Contended(
                f"{address.uri} was rewritten faster than it could be read whole",
                hint="read it again",
            )
    return NoteContent(
        uri=address.uri,
        kind=kind.decode(),
        text=(body or b"").decode("utf-8", "replace"),
        version=int(version or 0),
    )
