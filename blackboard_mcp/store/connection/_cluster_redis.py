"""A Redis Cluster as the board's placement: a workspace's home is the primary that owns its
slot.

Every key of a workspace carries the ``{workspace}`` hash tag (``_keys``), so one workspace
sits in one slot of one primary. Everything the store does for one workspace (a CAS
transaction, a read, a search) goes to a plain client for that primary: a WATCH/MULTI/EXEC
there is a real Redis transaction at the speed of a single Redis. (redis-py 8's cluster
pipeline can run a transaction too, but it sends each command under WATCH from a new thread
with its own event loop: about 170 transactions/s here against thousands.) The cluster
client stays for what crosses workspaces: the call admission script, the audit stream,
health and the workspace registry; it follows MOVED and ASK by itself.

Search: the standalone RediSearch (2.10) has no coordinator. An index lives on the node that
created it, and RediSearch declares the index *name* as the command's key, so a node answers
FT.CREATE or FT.SEARCH with MOVED unless it owns the slot of the name. Each primary therefore
gets its own index, named with a hash tag that falls in one of its own slots; every primary's
index covers the notes that primary holds, and a workspace's search goes to its primary. A
Redis 8 query engine with the coordinator (internal ``_FT.*`` commands present) answers for
the whole cluster from one index on any node: then there is one index, as on a single Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.connection import parse_url
from redis.exceptions import MovedError

from .._errors import StoreError, Unavailable
from . import _key_names as keys
from ._board_client import BoardClient, RedisCommands, RoutedClient, pool_options
from ._field_layout import FieldLayout
from ._location import failure_reason, redacted_url
from ._nodes import NodeReport, node_report
from ._pool import WaitingConnectionPool
from ._redis_errors import DEFAULT_REDIS_TIMEOUT_SECONDS, RedisOperation
from ._redis_py_adapter import reload_slot_map, slot_owner
from ._retired_keys import drop_retired_keys
from ._search_index import ensure_index, retire_old_indexes

log = logging.getLogger(__name__)
T = TypeVar("T")
Command = tuple[Any, ...]
# During a failover every failed call asks for a fresh slot map; one read of it per this
# many seconds serves them all.
_REFRESH_INTERVAL_SECONDS = 0.25


def _node_pool_kwargs(url: str) -> dict[str, Any]:
    # What every node connection shares with the URL: credentials, TLS, timeouts.
    kwargs = dict(parse_url(url))
    for name in ("host", "port", "db", "path"):
        kwargs.pop(name, None)
    return kwargs


class ClusterRedis:
    """A Redis Cluster: a workspace's home is the primary that owns its slot."""

    def __init__(
        self,
        *,
        url: str,
        pool_size: int,
        pool_wait_seconds: float,
        timeout_seconds: float = DEFAULT_REDIS_TIMEOUT_SECONDS,
        socket_timeout: float = 5.0,
    ) -> None:
        self._url = url
        self._pool_size = pool_size
        self._pool_wait_seconds = pool_wait_seconds
        self._timeout_seconds = timeout_seconds
        self._socket_timeout = socket_timeout
        self._cluster: RedisCluster[bytes] = RedisCluster.from_url(
            url,
            max_connections=pool_size,
            socket_timeout=socket_timeout,
            # As for a node's pool (pool_options): a connect has the operation's deadline.
            socket_connect_timeout=timeout_seconds,
            # A dead primary refuses connections at once; two quick retries, each after a
            # fresh look at the topology, then `unavailable`: calls fail fast during a
            # failover instead of waiting out redis-py's default back-off.
            retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), 2),  # type: ignore[arg-type]  # types-redis 4.6 stubs lag redis-py 8
        )
        self._routed = RoutedClient(self.client, timeout_seconds)
        self._layout = FieldLayout(self._routed)
        self._node_clients: dict[str, BoardClient] = {}
        # Each primary's index name ("host:port" -> name), for the topology it was made from.
        self._index_names: dict[str, str] = {}
        self._coordinator: bool | None = None
        self._started = False
        self._refresh_lock = asyncio.Lock()
        self._refreshed_at = 0.0

    @property
    def client(self) -> aioredis.Redis[bytes]:
        # RedisCluster offers the same command methods as a single client; what differs
        # (transactions, search routing) goes through home() and search_index().
        return cast("aioredis.Redis[bytes]", self._cluster)

    @property
    def routed(self) -> RedisCommands:
        """The cluster's client for commands that cross workspaces (it follows MOVED and
        ASK), with the operation deadline."""
        return self._routed

    @property
    def timeout_seconds(self) -> float:
        return self._timeout_seconds

    def operation(self) -> RedisOperation:
        """``async with``: one operation's deadline, redis-py's errors mapped to the store's."""
        return RedisOperation(self._timeout_seconds)

    @property
    def location(self) -> str:
        return f"{redacted_url(self._url)} (cluster)"

    async def _ready(self) -> None:
        if not self._started:
            async with self.operation():
                await self._cluster.initialize()
            self._started = True

    def _node_client(self, node: ClusterNode) -> BoardClient:
        client = self._node_clients.get(node.name)
        if client is None:
            pool = WaitingConnectionPool(
                host=node.host,
                port=node.port,
                # As for a single Redis (board_client): no socket timeout, one retry on a
                # fresh connection.
                **pool_options(
                    self._pool_size, self._pool_wait_seconds, connect_seconds=self._timeout_seconds
                ),
                **_node_pool_kwargs(self._url),
            )
            client = BoardClient(pool, timeout_seconds=self._timeout_seconds)
            self._node_clients[node.name] = client
        return client

    def _owner(self, workspace: str) -> ClusterNode:
        node = self._cluster.get_node_from_key(keys.sequence(workspace))
        if node is None:
            raise Unavailable(f"no node of the cluster serves workspace {workspace!r}'s slot")
        return node

    @property
    def layout(self) -> FieldLayout:
        return self._layout

    @property
    def registry_beside_notes(self) -> bool:
        # The registry is one key in a slot of its own, on whichever primary owns that slot.
        return False

    async def home(self, workspace: str) -> BoardClient:
        """A plain client for the primary that owns ``workspace``'s slot (as last known)."""
        await self._ready()
        if self._layout.refuses_calls:
            self._layout.refuse()
        return self._node_client(self._owner(workspace))

    async def at_home(self, workspace: str, op: Callable[[BoardClient], Awaitable[T]]) -> T:
        """Run ``op`` on the primary that holds ``workspace``, following a slot that moved
        once."""
        client = await self.home(workspace)
        try:
            return await op(client)
        except Unavailable as exc:
            # A failover or a reshard: read the slot map again so that this call (after
            # MOVED, when nothing ran) or the next one (after a dead primary) goes to the
            # slot's new primary. A dead primary is not waited for: `unavailable` now.
            moved = isinstance(exc.__cause__, MovedError)
            with contextlib.suppress(StoreError):
                await self.refresh(force=moved)
            if not moved:
                raise
            client = await self.home(workspace)
            return await op(client)

    async def send(self, commands: Sequence[Command], *, repeatable: bool = True) -> list[Any]:
        """Independent commands, each routed by redis-py to the node of its key (it follows
        MOVED and ASK). Inside ``operation()``. ``repeatable`` is for the single
        Redis's own wires; redis-py's cluster pipeline resends only on a MOVED or ASK, where
        the command did not run."""
        pipe = self._cluster.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return await pipe.execute()

    def topology(self, nodes: list[NodeReport]) -> dict[str, Any]:
        """What ``health`` says of the nodes beyond their memory and index."""
        return {"cluster": True, "nodes": [n.as_dict() for n in nodes]}

    async def search_index(self, workspace: str) -> tuple[RedisCommands, str]:
        await self._ready()
        if self._layout.refuses_calls:
            self._layout.refuse()
        if await self._has_coordinator():
            return self._routed, keys.INDEX_NAME
        owner = self._owner(workspace)
        name = self._index_names.get(owner.name)
        if name is None:
            # A primary this process has not seen before (a failover, a new shard).
            await self.refresh()
            owner = self._owner(workspace)
            name = self._index_names.get(owner.name, keys.INDEX_NAME)
        return self._node_client(owner), name

    async def start(self) -> None:
        self._layout.starting()
        await self._ready()
        await self._layout.ensure()
        await self._ensure_indexes()
        await drop_retired_keys(self._routed)

    async def refresh(self, *, force: bool = False) -> None:
        """Read the slot map again; a primary not seen before gets its index.

        Calls that fail together share one read (at most one per _REFRESH_INTERVAL_SECONDS
        unless ``force``: after MOVED the map is known to be stale).
        """
        async with self._refresh_lock:
            if not force and time.monotonic() - self._refreshed_at < _REFRESH_INTERVAL_SECONDS:
                return
            async with self.operation():
                await reload_slot_map(self._cluster)
            self._refreshed_at = time.monotonic()
            self._started = True
            if self._name_indexes() != self._index_names:
                await self._ensure_indexes()

    async def _has_coordinator(self) -> bool:
        if self._coordinator is None:
            async with self.operation():
                # The coordinator registers the shard-local halves of its commands as _FT.*.
                names = await self._cluster.execute_command(
                    "COMMAND LIST", "FILTERBY", "PATTERN", "_ft.*", target_nodes=RedisCluster.RANDOM
                )
            self._coordinator = bool(names)
            if self._coordinator:
                log.info("the cluster's query engine has a coordinator: one search index")
        return self._coordinator

    def _name_indexes(self) -> dict[str, str]:
        # The first of "0", "1", "2", ... whose slot a primary owns becomes its hash tag: every
        # gateway computes the same names from the same slot map, so concurrent creations
        # meet on one name and all but the first are told "already exists".
        primaries = {node.name for node in self._cluster.get_primaries()}
        names: dict[str, str] = {}
        for i in itertools.count():
            if len(names) == len(primaries) or i > 1_000_000:
                break
            tag = str(i)
            owner = slot_owner(self._cluster, self._cluster.keyslot(tag))
            if owner and owner.name in primaries and owner.name not in names:
                names[owner.name] = f"{keys.INDEX_NAME}{{{tag}}}"
        return names

    async def _ensure_indexes(self) -> None:
        if await self._has_coordinator():
            await ensure_index(self._routed)
            await retire_old_indexes(self._routed)
            return
        names = self._name_indexes()
        self._index_names = names
        nodes = {node.name: node for node in self._cluster.get_primaries()}
        for node_name, index in names.items():
            try:
                node_client = self._node_client(nodes[node_name])
                await ensure_index(node_client, index)
                await retire_old_indexes(node_client, index)
            except Exception as exc:  # one primary down must not keep the others unindexed
                log.warning(
                    "could not create the search index on %s: %s", node_name, failure_reason(exc)
                )

    async def nodes(self) -> list[NodeReport]:
        """Every node of the last known topology, primaries with their index, replicas too."""
        try:
            await self.refresh(force=True)
        except Exception as exc:  # the report says which nodes answer; the reason is kept
            log.warning("cluster topology could not be read: %s", failure_reason(exc))
        reports = []
        coordinator = bool(self._coordinator)
        for node in self._cluster.get_nodes():
            primary = node.server_type == "primary"
            index = self._index_names.get(node.name) if primary and not coordinator else None
            if coordinator and primary:
                index = keys.INDEX_NAME
            reports.append(
                await node_report(
                    self._node_client(node), node.name, "primary" if primary else "replica", index
                )
            )
        return reports

    async def close(self) -> None:
        for client in self._node_clients.values():
            await client.aclose()
        await self._cluster.aclose()  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8
