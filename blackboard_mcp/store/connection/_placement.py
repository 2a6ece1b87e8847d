"""Where a workspace lives: one Redis (``SingleRedis``, here), or the primary of a Redis
Cluster that owns its slot (``ClusterRedis``, in ``_cluster_redis``). ``open_placement``
decides which from the URL (or ``BB_REDIS_CLUSTER``); nothing outside these two modules
asks which kind a board is on. Both hand out the same things: the ``BoardClient`` a
workspace's operation runs on (``home``, ``at_home``: redis-py's commands, the store's round
trips and transactions, the operation's deadline), its search index, independent key-routed
commands (``send``), and the nodes for health. Both bound every operation by the same
``timeout_seconds``, given when the placement is opened.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar, cast

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.backoff import NoBackoff
from redis.retry import Retry as SyncRetry

from .._errors import Unavailable
from . import _key_names as keys
from ._board_client import BoardClient, RedisCommands, RoutedClient, board_client
from ._cluster_redis import ClusterRedis
from ._field_layout import FieldLayout
from ._location import failure_reason, redacted_url
from ._nodes import NodeReport, node_report
from ._redis_errors import DEFAULT_REDIS_TIMEOUT_SECONDS, RedisOperation
from ._retired_keys import drop_retired_keys
from ._search_index import ensure_index, retire_old_indexes

log = logging.getLogger(__name__)
T = TypeVar("T")
Command = tuple[Any, ...]

ClusterMode = Literal["auto", "on", "off"]
_DETECT_TIMEOUT_SECONDS = 3.0


def is_cluster_node(url: str, *, timeout_seconds: float = DEFAULT_REDIS_TIMEOUT_SECONDS) -> bool:
    """Whether the Redis at ``url`` is a node of a Redis Cluster (``INFO cluster``)."""
    # A start-up question: asked within the board's Redis timeout, and never long.
    seconds = min(_DETECT_TIMEOUT_SECONDS, timeout_seconds)
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


def wants_cluster(
    url: str, mode: ClusterMode, *, timeout_seconds: float = DEFAULT_REDIS_TIMEOUT_SECONDS
) -> bool:
    """``on``/``off`` as said; ``auto`` asks the server, and takes an unreachable one as single.

    An unreachable Redis under ``auto`` is taken for a single Redis, so that the gateway still
    starts and answers `unavailable` until Redis is back; set ``on`` where the board is a
    cluster, so that a node that is down at start-up cannot make it guess wrong.
    """
    if mode != "auto":
        return mode == "on"
    try:
        return is_cluster_node(url, timeout_seconds=timeout_seconds)
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

    def __init__(self, client: BoardClient) -> None:
        self._client = client
        self._layout = FieldLayout(client)

    @property
    def layout(self) -> FieldLayout:
        return self._layout

    @property
    def client(self) -> aioredis.Redis[bytes]:
        """redis-py's client for commands that name their keys."""
        return self._client.redis

    @property
    def routed(self) -> RedisCommands:
        """The client for commands that cross workspaces, with the operation deadline."""
        return self._client

    @property
    def timeout_seconds(self) -> float:
        return self._client.timeout_seconds

    def operation(self) -> RedisOperation:
        """``async with``: one operation's deadline, redis-py's errors mapped to the store's."""
        return self._client.operation()

    @property
    def location(self) -> str:
        return self._client.location

    @property
    def registry_beside_notes(self) -> bool:
        """Whether the workspace registry lives where every note does, so that a note's
        first version can join it in its own transaction."""
        return True

    async def home(self, workspace: str) -> BoardClient:
        if self._layout.refuses_calls:
            self._layout.refuse()
        return self._client

    async def at_home(self, workspace: str, op: Callable[[BoardClient], Awaitable[T]]) -> T:
        """Run ``op`` on the client that holds ``workspace``."""
        if self._layout.refuses_calls:
            self._layout.refuse()
        return await op(self._client)

    async def send(self, commands: Sequence[Command], *, repeatable: bool = True) -> list[Any]:
        """Independent commands, each on the node of its key: here one round trip on one of
        the store's own connections (sent again on a cut connection only when
        ``repeatable``). Inside ``operation()``."""
        return await self._client.round_trip(commands, repeatable=repeatable)

    def topology(self, nodes: list[NodeReport]) -> dict[str, Any]:
        """What ``health`` says of the nodes beyond their memory and index."""
        if not nodes[0].up:
            # Its reason says why; asking the same Redis for the note counts would only wait
            # out a second deadline.
            raise Unavailable(f"the board's Redis: {nodes[0].reason}")
        return {}

    async def search_index(self, workspace: str) -> tuple[RedisCommands, str]:
        if self._layout.refuses_calls:
            self._layout.refuse()
        return self._client, keys.INDEX_NAME

    async def start(self) -> None:
        """Create the search index if this is the first process to start on this Redis.

        An upgraded board gets this version's index, built in the background from the notes
        already there (``/readyz`` says "building" until it is done), and loses the old one;
        notes stored in an earlier layout are converted first (_field_layout.py).
        """
        self._layout.starting()
        # The old indexes go before the fields are renamed, which they would re-index for
        # nothing.
        await retire_old_indexes(self._client)
        await self._layout.ensure()
        await ensure_index(self._client)
        await drop_retired_keys(self._client)

    async def refresh(self, *, force: bool = False) -> None:
        """Nothing moves on a single Redis."""

    async def nodes(self) -> list[NodeReport]:
        return [await node_report(self._client, self.location, "primary", keys.INDEX_NAME)]

    async def close(self) -> None:
        await self._client.aclose()


Placement = SingleRedis | ClusterRedis


def open_placement(
    url: str,
    *,
    cluster: ClusterMode,
    pool_size: int,
    pool_wait_seconds: float,
    timeout_seconds: float = DEFAULT_REDIS_TIMEOUT_SECONDS,
) -> Placement:
    """The board's Redis at ``url``: a cluster when it is one (or ``cluster`` says so).

    ``pool_size`` connections per node, waited for in turn up to ``pool_wait_seconds``;
    each operation bounded by ``timeout_seconds``.
    """
    if wants_cluster(url, cluster, timeout_seconds=timeout_seconds):
        return ClusterRedis(
            url=url,
            pool_size=pool_size,
            pool_wait_seconds=pool_wait_seconds,
            timeout_seconds=timeout_seconds,
        )
    return SingleRedis(
        board_client(
            url,
            pool_size=pool_size,
            pool_wait_seconds=pool_wait_seconds,
            timeout_seconds=timeout_seconds,
        )
    )


def open_client(url: str, *, cluster: ClusterMode, timeout_seconds: float) -> RoutedClient:
    """A client for commands that name their keys (revocations, the token inventory), single
    or cluster, each operation bounded by ``timeout_seconds``."""
    if wants_cluster(url, cluster, timeout_seconds=timeout_seconds):
        client = cast("aioredis.Redis[bytes]", RedisCluster.from_url(url))
    else:
        client = aioredis.Redis.from_url(url)
    return RoutedClient(client, timeout_seconds=timeout_seconds)
