"""The board: the store's one public object, five operations over one Redis."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from . import _keys as keys
from ._addresses import parse_address
from ._delete import DeleteReport, delete_notes, delete_target, plan_delete
from ._index import ensure_index, index_ready
from ._links import LinkResult, check_link, write_links
from ._live import ChangeFeed, NoteContent, note_content, open_feed, readable_topics
from ._location import client_location, failure_reason
from ._notes import NoteWrite, build_write, check_digest
from ._pool import WaitingConnectionPool
from ._reads import get_state, list_keys
from ._redis_errors import mapped_redis_errors
from ._retention import RetentionPolicy, Swept, read_policy, sweep, write_policy
from ._search import search_keys
from ._source_reader import SourceReader
from ._tokencount import TiktokenCounter, TokenCounter
from ._transfer import Imported, ImportReport, count_notes, export_notes, import_notes
from ._views import Readable, every_topic
from ._writes import WriteLimits, WriteResult, write_note

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BoardLimits:
    """Sizes and bounds; defaults match the documented limits."""

    offload_bytes: int = 10 * 1024
    max_body_bytes: int = 1024 * 1024
    changelog_maxlen: int = 100_000
    cas_max_retries: int = 16
    source_root: Path | None = None
    source_max_bytes: int = 5 * 1024 * 1024
    source_read_timeout_seconds: float = 10.0
    source_read_threads: int = 4


class Board:
    """Notes, versions, links and search for every workspace on one Redis.

    The store knows nothing of HTTP or tokens: callers pass the author's name and a
    ``readable(topic)`` predicate, and the gateway has already checked the scopes.
    """

    def __init__(
        self,
        *,
        client: aioredis.Redis[bytes],
        limits: BoardLimits | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self._client = client
        self._limits = limits or BoardLimits()
        self._counter = counter or TiktokenCounter()
        self._write_limits = WriteLimits(
            offload_bytes=self._limits.offload_bytes,
            max_body_bytes=self._limits.max_body_bytes,
            changelog_maxlen=self._limits.changelog_maxlen,
            max_retries=self._limits.cas_max_retries,
        )
        self._sources = SourceReader(
            root=self._limits.source_root,
            max_bytes=self._limits.source_max_bytes,
            timeout_seconds=self._limits.source_read_timeout_seconds,
            max_threads=self._limits.source_read_threads,
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        limits: BoardLimits | None = None,
        pool_size: int = 64,
        pool_wait_seconds: float = 5.0,
    ) -> Board:
        """A board on the Redis at ``url``: ``pool_size`` connections, waited for in turn.

        A call that finds every connection busy waits up to ``pool_wait_seconds`` for one,
        then gets ``Overloaded`` (never ``Unavailable``: Redis is answering).
        """
        pool = WaitingConnectionPool.from_url(
            url,
            wait_seconds=pool_wait_seconds,
            max_connections=pool_size,
            socket_timeout=5.0,
            socket_connect_timeout=2.0,
            health_check_interval=15,
            # Pooled connections opened before a Redis restart are dead; without a retry each
            # one failed a call with `unavailable` the first time it was picked, long after
            # Redis was back. One retry on a fresh connection, for connection errors only
            # (never timeouts, whose command may have run). A watched transaction is not
            # retried by redis-py: it raises WatchError and run_transaction starts it over,
            # reading again.
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
        )
        client = aioredis.Redis.from_pool(pool)  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8
        return cls(client=client, limits=limits)

    @property
    def client(self) -> aioredis.Redis[bytes]:
        return self._client

    @property
    def location(self) -> str:
        """The Redis this board is on, without its password (for logs and messages)."""
        return client_location(self._client)

    @property
    def counter(self) -> TokenCounter:
        return self._counter

    async def start(self) -> None:
        """Create the search index if this is the first process to start on this Redis."""
        await ensure_index(self._client)

    async def close(self) -> None:
        self._sources.close()
        await self._client.aclose()  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8

    async def update_state(
        self,
        *,
        author: str,
        uri: object,
        digest: object,
        body: object = None,
        source_path: object = None,
        columns: object = None,
        rows: object = None,
        append: object = None,
        expect_version: object = None,
        sources: object = None,
        confidence: object = None,
        readable: Readable = every_topic,
    ) -> WriteResult:
        """``readable`` is the writer's read scope: what an error may tell of the note."""
        if source_path is not None:
            write = await self._source_write(
                author=author,
                uri=uri,
                digest=digest,
                source_path=source_path,
                other=(body, columns, rows, append),
                expect_version=expect_version,
                sources=sources,
                confidence=confidence,
            )
        else:
            write = build_write(
                uri=uri,
                digest=digest,
                author=author,
                body=body,
                columns=columns,
                rows=rows,
                append=append,
                expect_version=expect_version,
                sources=sources,
                confidence=confidence,
                max_body_bytes=self._limits.max_body_bytes,
            )
        return await write_note(
            self._client,
            write,
            counter=self._counter,
            limits=self._write_limits,
            may_read=readable(write.address.topic),
        )

    async def _source_write(
        self,
        *,
        author: str,
        uri: object,
        digest: object,
        source_path: object,
        other: tuple[object, ...],
        expect_version: object,
        sources: object,
        confidence: object,
    ) -> NoteWrite:
        from ._errors import InvalidArgument

        if any(v is not None for v in other):
            raise InvalidArgument(
                "source_path replaces body, columns+rows and append; give only one",
                argument="source_path",
            )
        check_digest(digest)
        base = build_write(
            uri=uri,
            digest=digest,
            author=author,
            expect_version=expect_version,
            sources=sources,
            confidence=confidence,
            max_body_bytes=self._limits.max_body_bytes,
        )
        summary = await self._sources.summarize(source_path)
        return NoteWrite(
            address=base.address,
            digest=base.digest,
            author=base.author,
            body=summary.body,
            table=summary.table,
            expect_version=base.expect_version,
            sources=base.sources,
            confidence=base.confidence,
            kind="table" if summary.table is not None else "summary",
            origin=f"{summary.relative_path} ({summary.size_bytes} bytes, "
            f"{summary.line_count} lines, sha256 {summary.sha256[:16]})",
        )

    async def get_state(
        self,
        *,
        uris: object,
        mode: object = None,
        fields: object = None,
        budget_tokens: object = None,
        readable: Readable = every_topic,
    ) -> dict[str, Any]:
        return await get_state(
            self._client,
            self._counter,
            uris=uris,
            mode=mode,
            fields=fields,
            budget_tokens=budget_tokens,
            readable=readable,
        )

    async def list_keys(
        self,
        *,
        workspace: str,
        topic: object = None,
        kind: object = None,
        order: object = None,
        limit: object = None,
        mode: object = None,
        fields: object = None,
        budget_tokens: object = None,
        cursor: object = None,
        after: object = None,
        readable: Readable = every_topic,
    ) -> dict[str, Any]:
        return await list_keys(
            self._client,
            self._counter,
            workspace=workspace,
            topic=topic,
            kind=kind,
            order=order,
            limit=limit,
            mode=mode,
            fields=fields,
            budget_tokens=budget_tokens,
            cursor=cursor,
            after=after,
            readable=readable,
        )

    async def search_keys(
        self,
        *,
        workspace: str,
        q: object,
        topic: object = None,
        limit: object = None,
        readable: Readable = every_topic,
    ) -> dict[str, Any]:
        return await search_keys(
            self._client,
            self._counter,
            workspace=workspace,
            q=q,
            topic=topic,
            limit=limit,
            readable=readable,
        )

    async def link_state(
        self,
        *,
        author: str,
        src: object,
        rel: object,
        dst: object,
        readable: Readable = every_topic,
    ) -> LinkResult:
        """``readable`` is the caller's read scope: what the answer may tell of ``src``."""
        source, relation, targets = check_link(src, rel, dst)
        return await write_links(
            self._client,
            source,
            relation,
            targets,
            author=author,
            changelog_maxlen=self._limits.changelog_maxlen,
            max_retries=self._limits.cas_max_retries,
            may_read=readable(source.topic),
        )

    async def delete(
        self, *, author: str, workspace: object, topic: object = None, uri: object = None
    ) -> DeleteReport:
        """Delete a note, a topic or (neither given) a workspace: its notes and retention."""
        return await delete_notes(
            self._client,
            delete_target(workspace, topic=topic, uri=uri),
            author=author,
            changelog_maxlen=self._limits.changelog_maxlen,
        )

    async def plan_delete(
        self, *, workspace: object, topic: object = None, uri: object = None
    ) -> DeleteReport:
        """What ``delete`` with the same target would remove now; removes nothing."""
        return await plan_delete(self._client, delete_target(workspace, topic=topic, uri=uri))

    async def retention(self, workspace: object) -> RetentionPolicy:
        return await read_policy(self._client, workspace)

    async def set_retention(
        self, *, workspace: object, topic: object = None, max_age_seconds: object
    ) -> RetentionPolicy:
        """Set the workspace's maximum note age, or a topic's; ``None`` clears it."""
        return await write_policy(
            self._client, workspace, topic=topic, max_age_seconds=max_age_seconds
        )

    async def sweep_retention(self, *, owner: str, lease_seconds: float) -> list[Swept] | None:
        """Delete expired notes, if this ``owner`` holds (or takes) the sweeper's lease."""
        return await sweep(
            self._client,
            owner=owner,
            lease_seconds=lease_seconds,
            changelog_maxlen=self._limits.changelog_maxlen,
        )

    def export_notes(self, workspace: object) -> AsyncIterator[dict[str, Any]]:
        """Every note of ``workspace`` as an export record, oldest write first."""
        return export_notes(self._client, workspace)

    async def count_notes(self, workspace: object) -> int:
        return await count_notes(self._client, workspace)

    async def import_notes(
        self, notes: Sequence[Imported], *, workspace: str, replace: bool, author: str
    ) -> ImportReport:
        """Write checked export records (see ``check_record``) into ``workspace``."""
        return await import_notes(
            self._client,
            notes,
            workspace=workspace,
            replace=replace,
            author=author,
            changelog_maxlen=self._limits.changelog_maxlen,
        )

    async def workspace_exists(self, workspace: str) -> bool:
        """``workspace`` was written to and not deleted whole since."""
        async with mapped_redis_errors():
            return bool(await self._client.sismember(keys.workspaces(), workspace))

    async def changes(self, workspace: str, count: int = 100) -> list[dict[str, str]]:
        """The newest entries of the workspace's change log, newest first."""
        async with mapped_redis_errors():
            entries = await self._client.xrevrange(keys.changelog(workspace), count=count)
        return [{k.decode(): v.decode() for k, v in fields.items()} for _id, fields in entries]

    def open_feed(self, workspace: str) -> ChangeFeed:
        """A blocking feed of the workspace's change log from now on, on its own connection."""
        return open_feed(self._client, workspace)

    async def topics(self, *, workspace: str, readable: Readable) -> list[tuple[str, int]]:
        """The topics ``readable`` allows, with their note counts (never a scan)."""
        return await readable_topics(self._client, workspace, readable)

    async def read_note(self, *, uri: object) -> NoteContent:
        """A note's whole content; the caller has checked its topic may be read."""
        return await note_content(self._client, parse_address(uri))

    async def health(self) -> dict[str, Any]:
        """Redis, index, memory and note counts per workspace, for ``blackboard-mcp health``."""
        async with mapped_redis_errors():
            await self._client.ping()
            memory = await self._client.info("memory")
            ready = await index_ready(self._client)
            workspaces = sorted(w.decode() for w in await self._client.smembers(keys.workspaces()))
            pipe = self._client.pipeline(transaction=False)
            for ws in workspaces:
                pipe.smembers(keys.topics(ws))
            topic_sets = await pipe.execute()
            pipe = self._client.pipeline(transaction=False)
            for ws, topics in zip(workspaces, topic_sets, strict=True):
                for topic in sorted(topics):
                    pipe.zcard(keys.by_name(ws, topic.decode()))
            counts = iter(await pipe.execute())
        notes = {
            ws: sum(next(counts) for _ in topics)
            for ws, topics in zip(workspaces, topic_sets, strict=True)
        }
        return {
            "redis": "ok",
            "index": "ready" if ready else "building",
            "used_memory_bytes": int(memory.get("used_memory", 0)),
            "notes": notes,
        }

    async def ready(self) -> bool:
        """Redis answers and the index exists (created now if a start-up attempt failed)."""
        try:
            await ensure_index(self._client)
            return await index_ready(self._client)
        except Exception as exc:  # readiness is a yes/no question; the reason goes to the log
            # One line per failed probe: a traceback every few seconds buries the reason.
            log.warning(
                "readiness: Redis at %s is not ready: %s", self.location, failure_reason(exc)
            )
            return False
