"""The board: the store's one public object, five operations over one Redis.

Longer than most modules on purpose: it is the store's whole face (the five tools'
operations and the operators' ones), each method a few lines handing a typed request or a
checked name to the part that does the work; split, the face would have to be pieced
together from several files.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import redis.asyncio as aioredis

from ._errors import InvalidArgument, StoreError
from .connection import _key_names as keys
from .connection._board_client import BoardClient
from .connection._location import failure_reason
from .connection._nodes import NodeReport
from .connection._placement import ClusterMode, Placement, SingleRedis, open_placement
from .connection._redis_errors import DEFAULT_REDIS_TIMEOUT_SECONDS
from .connection._tx import Gate, ReplicaWait
from .lifecycle._delete import (
    DeleteReport,
    delete_notes,
    delete_target,
    forget_workspace,
    plan_delete,
)
from .lifecycle._restore import restore_request
from .lifecycle._retention import (
    RetentionPolicy,
    Swept,
    plan_expiry,
    plan_history,
    read_policy,
    sweep,
    with_max_age,
    write_history_policy,
    write_policy,
)
from .lifecycle._transfer import (
    Imported,
    ImportReport,
    Progress,
    count_notes,
    export_notes,
    import_notes,
)
from .notes._addresses import Address, validate_name, validate_workspace
from .notes._appends import append_note
from .notes._history import MAX_HISTORY_VERSIONS, HistoryLimits
from .notes._links import LinkResult, write_links
from .notes._notes import MAX_AUTHOR_CHARS, NoteWrite, check_sizes
from .notes._tokencount import TiktokenCounter, TokenCounter
from .notes._writes import WriteLimits, WriteResult, write_note
from .reads._live import ChangeFeed, NoteContent, note_content, open_feed, readable_topics
from .reads._reads import get_state, list_keys
from .reads._views import Readable, every_topic
from .requests import GetState, LinkState, ListKeys, SearchKeys, UpdateState
from .search._search import search_keys
from .sources._source_reader import SourceReader

log = logging.getLogger(__name__)
T = TypeVar("T")


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
    # Replicas that must have a write before it is acknowledged (WAIT), and how long to wait.
    wait_replicas: int = 0
    wait_timeout_ms: int = 1000
    # Past versions kept per note, and for how long (store/notes/_history.py); 0 turns
    # history off, or the age bound off.
    history_versions: int = 50
    history_max_age_seconds: int = 30 * 24 * 3600
    # A search ranks the matches among the notes of the workspace's last ``search_window``
    # writes when they hold enough, else the whole workspace's (store/search/_search.py);
    # 0 ranks the whole workspace's every time.
    search_window: int = 20_000

    def __post_init__(self) -> None:
        # The settings check these too; a Board built in code must not get past them: each
        # write's script drops at most DROPS_PER_WRITE versions, sized for this bound.
        if not 0 <= self.history_versions <= MAX_HISTORY_VERSIONS:
            raise ValueError(
                f"history_versions must be 0 to {MAX_HISTORY_VERSIONS}, not {self.history_versions}"
            )
        if self.history_max_age_seconds < 0:
            raise ValueError("history_max_age_seconds must be 0 (no bound) or more")
        if self.search_window < 0:
            raise ValueError("search_window must be 0 (the whole board) or more")


class Board:
    """Notes, versions, links and search for every workspace on one Redis.

    The store knows nothing of HTTP or tokens: callers pass the author's name and a
    ``readable(topic)`` predicate, and the gateway has already checked the scopes.
    """

    def __init__(
        self,
        *,
        client: BoardClient | None = None,
        placement: Placement | None = None,
        limits: BoardLimits | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        if placement is None:
            if client is None:
                raise TypeError("a Board needs a client or a placement")
            placement = SingleRedis(client)
        self._placement = placement
        self._client = placement.client
        self._limits = limits or BoardLimits()
        self._wait = (
            ReplicaWait(self._limits.wait_replicas, self._limits.wait_timeout_ms)
            if self._limits.wait_replicas > 0
            else None
        )
        self._counter = counter or TiktokenCounter()
        self._write_limits = WriteLimits(
            offload_bytes=self._limits.offload_bytes,
            max_body_bytes=self._limits.max_body_bytes,
            changelog_maxlen=self._limits.changelog_maxlen,
            max_retries=self._limits.cas_max_retries,
            wait=self._wait,
            history=HistoryLimits(
                versions=self._limits.history_versions,
                max_age_ms=self._limits.history_max_age_seconds * 1000,
            ),
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
        timeout_seconds: float = DEFAULT_REDIS_TIMEOUT_SECONDS,
        cluster: ClusterMode = "auto",
    ) -> Board:
        """A board on the Redis at ``url``: ``pool_size`` connections, waited for in turn.

        A call that finds every connection busy waits up to ``pool_wait_seconds`` for one,
        then gets ``Overloaded`` (never ``Unavailable``: Redis is answering); one that waits
        longer than ``timeout_seconds`` for Redis gets ``Unavailable``. ``url`` may name
        any node of a Redis Cluster (``cluster="auto"`` asks it; see ``_placement``).
        """
        placement = open_placement(
            url,
            cluster=cluster,
            pool_size=pool_size,
            pool_wait_seconds=pool_wait_seconds,
            timeout_seconds=timeout_seconds,
        )
        return cls(placement=placement, limits=limits)

    async def _at_home(self, workspace: str, op: Callable[[BoardClient], Awaitable[T]]) -> T:
        return await self._placement.at_home(workspace, op)

    @property
    def client(self) -> aioredis.Redis[bytes]:
        return self._client

    @property
    def location(self) -> str:
        """The Redis this board is on, without its password (for logs and messages)."""
        return self._placement.location

    @property
    def redis(self) -> Placement:
        """Where this board's keys live: what the access adapters (admission, audit) send
        their key-routed commands through."""
        return self._placement

    @property
    def counter(self) -> TokenCounter:
        return self._counter

    async def start(self) -> None:
        """Create the search index (one per primary of a cluster) unless it exists."""
        await self._placement.start()

    async def close(self) -> None:
        self._sources.close()
        await self._placement.close()

    async def update_state(
        self,
        request: UpdateState,
        *,
        author: str,
        readable: Readable = every_topic,
        gate: Gate | None = None,
    ) -> WriteResult:
        """``readable`` is the writer's read scope: what an error may tell of the note.

        ``gate`` is judged before anything is read or written: in the write's first round
        trip, or (a ``source_path`` write, which reads a file first) in one of its own.
        """
        write = await self._note_write(request, author=author, gate=gate)
        # The catch-up note is every reader's, whatever its topics.
        may_read = write.address.is_catch_up or readable(write.address.topic)
        first_gate = None if request.source_path is not None else gate
        # Where the registry is on the note's node, a first version joins it in its own
        # transaction: no round trip of its own, and never a note without its workspace.
        registry: str | None = None
        apply: Callable[..., Awaitable[WriteResult]] = append_note
        if write.append is None:
            registry = keys.workspaces() if self._placement.registry_beside_notes else None
            apply = functools.partial(write_note, registry=registry)
        result = await self._at_home(
            write.address.workspace,
            lambda client: apply(
                client,
                write,
                counter=self._counter,
                limits=self._write_limits,
                may_read=may_read,
                gate=first_gate,
            ),
        )
        if result["version"] == 1 and registry is None:
            await self._register_workspace(write.address.workspace)
        return result

    async def _register_workspace(self, workspace: str) -> None:
        # On a cluster the registry is one key in a slot of its own, which cannot join the
        # write's transaction (nor an append's script): it is added after the write commits
        # (on the note's first version), and a failure here must not turn a committed write
        # into an error.
        try:
            async with self._placement.operation():
                await self._placement.send([("SADD", keys.workspaces(), workspace)])
        except StoreError as exc:
            log.warning("workspace %s not added to the registry: %s", workspace, exc)

    async def _note_write(
        self, request: UpdateState, *, author: str, gate: Gate | None
    ) -> NoteWrite:
        """The note to write: the request's content, or the summary of its ``source_path``
        (read after ``gate`` is passed, in a round trip of its own), within the limits."""
        # Not dataclasses.replace on a base note: it looks the dataclass's fields up on
        # every write.
        note = functools.partial(
            NoteWrite,
            address=request.uri,
            digest=request.digest,
            author=author[:MAX_AUTHOR_CHARS],
            expect_version=request.expect_version,
            sources=request.sources,
            confidence=request.confidence,
        )
        if request.source_path is None:
            check_sizes(
                body=request.body,
                table=request.table,
                append=request.append,
                max_body_bytes=self._limits.max_body_bytes,
            )
            return note(
                body=request.body,
                table=request.table,
                append=request.append,
                kind="table" if request.table is not None else "text",
            )
        if gate is not None:
            await self._at_home(request.uri.workspace, lambda client: client.pass_gate(gate))
        summary = await self._sources.summarize(request.source_path)
        return note(
            body=summary.body,
            table=summary.table,
            kind="table" if summary.table is not None else "summary",
            origin=f"{summary.relative_path} ({summary.size_bytes} bytes, "
            f"{summary.line_count} lines, sha256 {summary.sha256[:16]})",
        )

    async def get_state(
        self, request: GetState, *, readable: Readable = every_topic, gate: Gate | None = None
    ) -> dict[str, Any]:
        """``gate`` rides the read's first round trip and is judged before anything read is
        used."""
        return await self._at_home(
            request.workspace,
            lambda client: get_state(client, self._counter, request, readable=readable, gate=gate),
        )

    async def list_keys(
        self,
        request: ListKeys,
        *,
        workspace: str,
        readable: Readable = every_topic,
        gate: Gate | None = None,
    ) -> dict[str, Any]:
        """``gate`` rides the listing's first round trip and is judged before anything read
        is used (alone, if the listing sends none)."""
        return await self._at_home(
            workspace,
            lambda client: list_keys(
                client, self._counter, request, workspace=workspace, readable=readable, gate=gate
            ),
        )

    async def search_keys(
        self,
        request: SearchKeys,
        *,
        workspace: str,
        readable: Readable = every_topic,
        gate: Gate | None = None,
    ) -> dict[str, Any]:
        """``gate`` rides the search's first round trip to the workspace's node and is judged
        before anything read is used."""

        async def search(home: BoardClient) -> dict[str, Any]:
            client, index = await self._placement.search_index(workspace)
            return await search_keys(
                client,
                self._counter,
                request,
                workspace=workspace,
                readable=readable,
                home=home,
                index=index,
                window=self._limits.search_window,
                gate=gate,
            )

        return await self._at_home(workspace, search)

    async def link_state(
        self,
        request: LinkState,
        *,
        author: str,
        readable: Readable = every_topic,
        gate: Gate | None = None,
    ) -> LinkResult:
        """``readable`` is the caller's read scope: what the answer may tell of ``src``.

        ``gate`` is judged in the transaction's first round trip, before anything is written.
        """
        source = request.src
        return await self._at_home(
            source.workspace,
            lambda client: write_links(
                client,
                source,
                request.rel,
                list(request.dst),
                author=author,
                changelog_maxlen=self._limits.changelog_maxlen,
                max_retries=self._limits.cas_max_retries,
                remove=request.remove,
                may_read=readable(source.topic),
                gate=gate,
                wait=self._wait,
            ),
        )

    async def restore(self, address: Address, *, author: str) -> WriteResult:
        """Write the past version ``address`` names (``...@N``) as the note's newest, by
        compare-and-swap against the version it reads now (store/lifecycle/_restore.py)."""
        request = await self._at_home(
            address.workspace, lambda client: restore_request(client, address)
        )
        return await self.update_state(request, author=author)

    async def delete(
        self, *, author: str, workspace: str, topic: str | None = None, uri: str | None = None
    ) -> DeleteReport:
        """Delete a note, a topic or (neither given) a workspace: its notes and retention."""
        target = delete_target(workspace, topic=topic, uri=uri)
        report = await self._at_home(
            target.workspace,
            lambda client: delete_notes(
                client, target, author=author, changelog_maxlen=self._limits.changelog_maxlen
            ),
        )
        if target.topic is None and target.member is None:
            # The registry has no hash tag: on a cluster it lives in another slot than the
            # workspace, so it is updated here, through the client that routes each key.
            await forget_workspace(self._placement.routed, target.workspace)
        return report

    async def plan_delete(
        self, *, workspace: str, topic: str | None = None, uri: str | None = None
    ) -> DeleteReport:
        """What ``delete`` with the same target would remove now; removes nothing."""
        target = delete_target(workspace, topic=topic, uri=uri)
        return await self._at_home(target.workspace, lambda client: plan_delete(client, target))

    async def retention(self, workspace: str) -> RetentionPolicy:
        ws = validate_workspace(workspace)
        return await self._at_home(ws, lambda client: read_policy(client, ws))

    async def set_retention(
        self, *, workspace: str, topic: str | None = None, max_age_seconds: int | None
    ) -> RetentionPolicy:
        """Set the workspace's maximum note age, or a topic's; ``None`` clears it."""
        ws = validate_workspace(workspace)
        name = None if topic is None else validate_name(topic, "topic")
        return await self._at_home(
            ws,
            lambda client: write_policy(client, ws, topic=name, max_age_seconds=max_age_seconds),
        )

    async def plan_retention(
        self, *, workspace: str, topic: str | None = None, max_age_seconds: int | None
    ) -> DeleteReport:
        """The notes the next sweep would delete were this maximum age set (the workspace's,
        or ``topic``'s); sets nothing, deletes nothing."""
        ws = validate_workspace(workspace)
        if topic is not None:
            validate_name(topic, "topic")
        # The plan asks the search index, which a board only the CLI has opened may lack.
        await self.start()
        client, index = await self._placement.search_index(ws)
        current = await self._at_home(ws, lambda home: read_policy(home, ws))
        planned = with_max_age(current, topic=topic, max_age_seconds=max_age_seconds)
        label = f"bb://{ws}/" + (f"{topic}/" if topic else "")
        async with self._placement.operation():
            return await plan_expiry(client, index, ws, planned, report=DeleteReport(label))

    async def plan_history_bounds(
        self,
        *,
        workspace: str,
        topic: str | None = None,
        versions: int | None,
        max_age_seconds: int | None,
    ) -> DeleteReport:
        """The kept past versions these history bounds would drop that today's keep; sets
        nothing, drops nothing."""
        ws = validate_workspace(workspace)
        name = "*" if topic is None else validate_name(topic, "topic")
        limits = self._limits

        async def plan(client: BoardClient) -> DeleteReport:
            before = await read_policy(client, ws)
            after = dataclasses.replace(
                before, versions=dict(before.versions), version_ages=dict(before.version_ages)
            )
            for bounds, value in (
                (after.versions, versions),
                (after.version_ages, max_age_seconds),
            ):
                if value is None:
                    bounds.pop(name, None)
                else:
                    bounds[name] = value
            label = f"bb://{ws}/" + (f"{topic}/" if topic else "")
            return await plan_history(
                client,
                ws,
                before,
                after,
                default_versions=limits.history_versions,
                default_age_seconds=limits.history_max_age_seconds,
                report=DeleteReport(label),
            )

        return await self._at_home(ws, plan)

    async def set_history_bounds(
        self,
        *,
        workspace: str,
        topic: str | None = None,
        versions: int | None,
        max_age_seconds: int | None,
    ) -> RetentionPolicy:
        """Set the past versions kept per note, and their maximum age, for the workspace or
        one topic; ``None`` clears a bound (the workspace's, then the board's applies)."""
        ws = validate_workspace(workspace)
        return await self._at_home(
            ws,
            lambda client: write_history_policy(
                client, ws, topic=topic, versions=versions, max_age_seconds=max_age_seconds
            ),
        )

    async def sweep_retention(
        self, *, owner: str, lease_seconds: float, now_ms: int | None = None
    ) -> list[Swept] | None:
        """Delete expired notes, if this ``owner`` holds (or takes) the sweeper's lease; ages
        are counted to ``now_ms`` (default: the Redis server's clock).

        The lease, the registry and the policies are single keys, routed each on its own; a
        workspace's expired notes are found and deleted on its home primary, in its index.
        """
        return await sweep(
            self._placement.routed,
            locate=self._placement.search_index,
            owner=owner,
            lease_seconds=lease_seconds,
            changelog_maxlen=self._limits.changelog_maxlen,
            now_ms=now_ms,
            version_max_age_seconds=self._limits.history_max_age_seconds,
        )

    async def export_notes(self, workspace: str) -> AsyncIterator[dict[str, Any]]:
        """Every note of ``workspace`` as an export record, oldest write first."""
        ws = validate_workspace(workspace)
        client = await self._placement.home(ws)
        async for record in export_notes(client, ws):
            yield record

    async def count_notes(self, workspace: str) -> int:
        ws = validate_workspace(workspace)
        return await self._at_home(ws, lambda client: count_notes(client, ws))

    async def import_notes(
        self,
        records: Callable[[], Iterable[Imported]],
        *,
        workspace: str,
        replace: bool,
        author: str,
        progress: Progress | None = None,
    ) -> ImportReport:
        """Write checked export records (see ``check_record``, ``ExportFile``) into
        ``workspace``; ``records()`` is called once per pass and gives the same records."""
        await self._register_workspace(workspace)
        return await self._at_home(
            workspace,
            lambda client: import_notes(
                client,
                records,
                workspace=workspace,
                replace=replace,
                author=author,
                changelog_maxlen=self._limits.changelog_maxlen,
                counter=self._counter,
                progress=progress,
            ),
        )

    async def workspace_exists(self, workspace: str) -> bool:
        """``workspace`` was written to and not deleted whole since."""
        async with self._placement.operation():
            return bool(await self._client.sismember(keys.workspaces(), workspace))

    async def open_feed(self, workspace: str) -> ChangeFeed:
        """A blocking feed of the workspace's change log from now on, on its own connection.

        On a cluster the feed stays on the primary that held the workspace when it opened;
        after a failover or a reshard it fails and its owner opens a new one.
        """
        return open_feed(await self._placement.home(workspace), workspace)

    async def topics(self, *, workspace: str, readable: Readable) -> list[tuple[str, int]]:
        """The topics ``readable`` allows, with their note counts (never a scan)."""
        return await self._at_home(
            workspace, lambda client: readable_topics(client, workspace, readable)
        )

    async def read_note(self, address: Address) -> NoteContent:
        """A note's whole content; the caller has checked its topic may be read."""
        if address.start is not None:
            raise InvalidArgument(
                f"a resource is a whole note: read {address.note.uri} (a part, "
                f"{address.uri}, is read with get_state)",
                argument="uri",
            )
        return await self._at_home(address.workspace, lambda client: note_content(client, address))

    async def changes(self, workspace: str, count: int = 100) -> list[dict[str, str]]:
        """The newest entries of the workspace's change log, newest first."""

        async def read(client: BoardClient) -> Any:
            async with client.operation():
                return await client.redis.xrevrange(keys.changelog(workspace), count=count)

        entries = await self._at_home(workspace, read)
        return [{k.decode(): v.decode() for k, v in fields.items()} for _id, fields in entries]

    async def health(self) -> dict[str, Any]:
        """Every node, its index and memory, and note counts per workspace, for `health`."""
        nodes = await self._placement.nodes()
        report: dict[str, Any] = {
            "redis": "ok" if all(n.up for n in nodes) else "unavailable",
            "index": _index_state(nodes),
            "used_memory_bytes": sum(n.used_memory_bytes for n in nodes if n.role == "primary"),
        }
        report.update(self._placement.topology(nodes))
        async with self._placement.operation():
            workspaces = sorted(w.decode() for w in await self._client.smembers(keys.workspaces()))
            pipe = self._client.pipeline(transaction=False)
            for ws in workspaces:
                pipe.smembers(keys.topics(ws))
            topic_sets = await pipe.execute()
            pipe = self._client.pipeline(transaction=False)
            for ws, topics in zip(workspaces, topic_sets, strict=True):
                for topic in sorted(topics):
                    pipe.zcard(keys.by_name(ws, topic.decode()))
            counts = iter(await pipe.execute() if any(topic_sets) else [])
        report["notes"] = {
            ws: sum(next(counts) for _ in topics)
            for ws, topics in zip(workspaces, topic_sets, strict=True)
        }
        return report

    async def nodes(self) -> list[NodeReport]:
        """Each Redis node: up or not, its role, its search index (for /metrics and /readyz)."""
        return await self._placement.nodes()

    async def ready(self) -> bool:
        """Every node answers and every primary's index exists (created now if it was not).

        Not while this process renames the board's note fields (an upgrade's first start):
        the conversion is not run a second time beside the first."""
        if self._placement.layout.converting:
            log.warning("readiness: renaming the board's note fields to this release's layout")
            return False
        try:
            await self._placement.start()
            nodes = await self._placement.nodes()
        except Exception as exc:  # readiness is a yes/no question; the reason goes to the log
            # One line per failed probe: a traceback every few seconds buries the reason.
            log.warning(
                "readiness: Redis at %s is not ready: %s", self.location, failure_reason(exc)
            )
            return False
        down = [n for n in nodes if not n.up or n.index not in ("ready", "-")]
        for node in down:
            log.warning(
                "readiness: Redis node %s (%s) is not ready: %s",
                node.address,
                node.role,
                node.reason or f"index {node.index}",
            )
        return not down


def _index_state(nodes: list[NodeReport]) -> str:
    states = {n.index for n in nodes if n.role == "primary"}
    if states == {"ready"}:
        return "ready"
    return "building" if states <= {"ready", "building"} else "unavailable"
