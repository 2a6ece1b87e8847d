"""Where a workspace lives: one Redis (``SingleRedis``, here), or the primary of a Redis
Cluster that owns its slot (``ClusterRedis``, in ``_cluster_redis``). ``open_placement``
decides which from the URL (or ``BB_REDIS_CLUSTER``); nothing outside these two modules
asks which kind a board is on. Both hand out the same things: the client a workspace's
operation runs on (``home``, ``at_home``), its search index, independent key-routed
commands (``send``), and the nodes for health.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar, cast

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.retry import Retry as SyncRetry

from .._errors import Unavailable
from ..search._index import ensure_index, retire_old_indexes
from ..search._upgrade import drop_retired_keys
from . import _keys as keys
from ._cluster_redis import ClusterRedis
from ._location import client_location, failure_reason, redacted_url
from ._nodes import NodeReport, node_report
from ._pool import WaitingConnectionPool
from ._redis_errors import redis_timeout
from ._wire import WireConnection

log = logging.getLogger(__name__)
T = TypeVar("T")
Command = tuple[Any, ...]

ClusterMode = Literal["auto", "on", "off"]
_DETECT_TIMEOUT_SECONDS = 3.0


def is_cluster_node(url: str) -> bool:
    """Whether the Redis at ``url`` is a node of a Redis Cluster (``INFO cluster``)."""
    # A start-up question: asked within the process's Redis timeout, and never long.
    seconds = min(_DETECT_TIMEOUT_SECONDS, redis_timeout())
    client = redis.Redis.from_url(
        url,
        socket_timeout=seconds,
        socket_connect_timeout=seconds,
        retry=SyncRetry(NoBackoff(), 0),
    )
    try:
        info = client.info("cluster")
    finally:
        client.close()
    return str(info.get("cluster_enabled", 0)) == "1"


def wants_cluster(url: str, mode: ClusterMode) -> bool:
    """``on``/``off`` as said; ``auto`` asks the server, and takes an unreachable one as single.

    An unreachable Redis under ``auto`` is taken for a single Redis, so that the gateway still
    starts and answers `unavailable` until Redis is back; set ``on`` where the board is a
    cluster, so that a node that is down at start-up cannot make it guess wrong.
    """
    if mode != "auto":
        return mode == "on"
    try:
        return is_cluster_node(url)
    except (redis.RedisError, OSError) as exc:
        # INFO, not WARNING: a CLI command reports the unreachable Redis itself, in one line.
        log.info(
            "could not ask %s whether it is a cluster node (%s); using it as a single Redis",
            redacted_url(url),
            failure_reason(exc),
        )
        return False


class SingleRedis:
    """One Redis holds every workspace and the one search index."""

    def __init__(self, client: aioredis.Redis[bytes]) -> None:
        if not isinstance(client.connection_pool, WaitingConnectionPool):
            # Transactions borrow their connections from the board's own kind of pool.
            raise TypeError("a board's client is built by board_client(url)")
        self._client = client

    @property
    def client(self) -> aioredis.Redis[bytes]:
        return self._client

    @property
    def location(self) -> str:
        return client_location(self._client)

    async def home(self, workspace: str) -> aioredis.Redis[bytes]:
        return self._client

    async def at_home(
        self, workspace: str, op: Callable[[aioredis.Redis[bytes]], Awaitable[T]]
    ) -> T:
        """Run ``op`` on the client that holds ``workspace``."""
        return await op(self._client)

    async def send(self, commands: Sequence[Command], *, repeatable: bool = True) -> list[Any]:
        """Independent commands, each on the node of its key: here one round trip on one of
        the store's own connections (sent again on a cut connection only when
        ``repeatable``). Inside ``mapped_redis_errors()``."""
        pool: WaitingConnectionPool = self._client.connection_pool
        return await pool.round_trip(commands, repeatable=repeatable)

    def topology(self, nodes: list[NodeReport]) -> dict[str, Any]:
        """What ``health`` says of the nodes beyond their memory and index."""
        if not nodes[0].up:
            # Its reason says why; asking the same Redis for the note counts would only wait
            # out a second deadline.
            raise Unavailable(f"the board's Redis: {nodes[0].reason}")
        return {}

    async def search_index(self, workspace: str) -> tuple[aioredis.Redis[bytes], str]:
        return self._client, keys.INDEX_NAME

    async def start(self) -> None:
        """Create the search index if this is the first process to start on this Redis.

        An upgraded board gets this version's index, built in the background from the notes
        already there (``/readyz`` says "building" until it is done), and loses the old one.
        """
        await ensure_index(self._client)
        await retire_old_indexes(self._client)
        await drop_retired_keys(self._client)

    async def refresh(self, *, force: bool = False) -> None:
        """Nothing moves on a single Redis."""

    async def nodes(self) -> list[NodeReport]:
        return [await node_report(self._client, self.location, "primary", keys.INDEX_NAME)]

    async def close(self) -> None:
        await self._client.aclose()  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8


Placement = SingleRedis | ClusterRedis


def open_placement(
    url: str, *, cluster: ClusterMode, pool_size: int, pool_wait_seconds: float
) -> Placement:
    """The board's Redis at ``url``: a cluster when it is one (or ``cluster`` says so)."""
    if wants_cluster(url, cluster):
        return ClusterRedis(url=url, pool_size=pool_size, pool_wait_seconds=pool_wait_seconds)
    return SingleRedis(board_client(url, pool_size=pool_size, pool_wait_seconds=pool_wait_seconds))


def board_client(
    url: str,
    *,
    pool_size: int = 64,
    pool_wait_seconds: float = 5.0,
    wire_class: type[WireConnection] = WireConnection,
) -> aioredis.Redis[bytes]:
    """A client of the single Redis at ``url`` on the board's kind of pool
    (store/connection/_pool.py),
    whose transactions run on ``wire_class`` connections."""
    pool = WaitingConnectionPool.from_url(
        url,
        wait_seconds=pool_wait_seconds,
        max_connections=pool_size,
        wire_class=wire_class,
        # No socket timeout: each store operation has one deadline instead
        # (store/connection/_redis_errors.py), where redis-py put a timer around every command.
        socket_timeout=None,
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
    return aioredis.Redis.from_pool(pool)  # type: ignore[attr-defined, no-any-return]  # types-redis 4.6 stubs lag redis-py 8


def open_client(url: str, *, cluster: ClusterMode) -> aioredis.Redis[bytes]:
    """A client for commands that name their keys (revocations, audit), single or cluster."""
    if wants_cluster(url, cluster):
        return cast("aioredis.Redis[bytes]", RedisCluster.from_url(url))
    return aioredis.Redis.from_url(url)
