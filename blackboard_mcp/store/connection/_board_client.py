"""The board's client of one Redis node: what placement hands the store's code.

One object says everything a store operation needs of the Redis it runs on: redis-py's
client for ordinary commands (``redis``), the store's own round trips and transactions
(on the wires of the same bounded pool, store/connection/_pool.py), and how long one
operation may wait for Redis (``timeout_seconds``, from the settings), with redis-py's
errors mapped to the store's (``operation()``). ``RoutedClient`` is the same deadline on
a client that routes each command by its key, for what crosses workspaces; code that sends
only redis-py's commands takes either (``RedisCommands``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ._location import settings_location
from ._pool import WaitingConnectionPool
from ._redis_errors import DEFAULT_REDIS_TIMEOUT_SECONDS, RedisOperation, mapped_redis_errors
from ._redis_py_adapter import pool_settings
from ._scripts import Command
from ._tx import Gate, ReplicaWait, TransactionBody, run_transaction
from ._wire import WireConnection, first_error

T = TypeVar("T")


class RedisCommands(Protocol):
    """What code that sends only redis-py's commands needs of a client: the commands, and
    one operation's deadline with redis-py's errors mapped to the store's."""

    @property
    def redis(self) -> aioredis.Redis[bytes]: ...

    def operation(self) -> RedisOperation: ...


@dataclass(frozen=True)
class RoutedClient:
    """redis-py's client that sends each command to the node of its key (a cluster's client,
    or the single Redis's), for what crosses workspaces: the workspace registry, the sweeper's
    lease, a cluster-wide search."""

    redis: aioredis.Redis[bytes]
    timeout_seconds: float

    def __post_init__(self) -> None:
        if not self.timeout_seconds > 0:
            raise ValueError("the Redis timeout is a positive number of seconds")

    def operation(self) -> RedisOperation:
        """``async with``: one operation's deadline, redis-py's errors mapped to ours."""
        return mapped_redis_errors(self.timeout_seconds)

    async def aclose(self) -> None:
        await self.redis.aclose()  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8


class BoardClient:
    """One Redis node as the store's code uses it."""

    __slots__ = ("_pool", "_redis", "_timeout_seconds")

    def __init__(
        self,
        pool: WaitingConnectionPool,
        *,
        timeout_seconds: float,
        redis: aioredis.Redis[bytes] | None = None,
    ) -> None:
        """``redis``: redis-py's client on ``pool``, when one exists already."""
        if not timeout_seconds > 0:
            raise ValueError("the Redis timeout is a positive number of seconds")
        self._pool = pool
        if redis is None:
            redis = aioredis.Redis.from_pool(pool)  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8
        self._redis: aioredis.Redis[bytes] = redis
        self._timeout_seconds = timeout_seconds

    @property
    def redis(self) -> aioredis.Redis[bytes]:
        """redis-py's client on this node's pool, for every command not sent below."""
        return self._redis

    @property
    def timeout_seconds(self) -> float:
        """How long one store operation on this node may wait for Redis."""
        return self._timeout_seconds

    @property
    def location(self) -> str:
        """The node, as a URL that never carries the password."""
        return settings_location(*pool_settings(self._pool))

    def operation(self) -> RedisOperation:
        """``async with``: one store operation's deadline, redis-py's errors mapped to ours."""
        return mapped_redis_errors(self._timeout_seconds)

    async def round_trip(
        self, commands: Sequence[Command], *, repeatable: bool = True
    ) -> list[Any]:
        """Plain commands (no WATCH, no MULTI) in one round trip; their replies. Sent again on
        a cut connection only when ``repeatable`` (store/connection/_pool.py,
        ``lend_answered``). Raises the first error reply. Inside ``operation()``."""
        return await self._pool.round_trip(commands, repeatable=repeatable)

    async def transaction(
        self,
        watch: Sequence[str],
        body: TransactionBody[T],
        *,
        max_retries: int,
        first_reads: Sequence[Command] = (),
        gate: Gate | None = None,
        wait: ReplicaWait | None = None,
    ) -> T:
        """WATCH/MULTI/EXEC with bounded retries (store/connection/_tx.py), one operation."""
        return await run_transaction(
            self._pool,
            watch,
            body,
            timeout_seconds=self._timeout_seconds,
            max_retries=max_retries,
            first_reads=first_reads,
            gate=gate,
            wait=wait,
        )

    @contextlib.asynccontextmanager
    async def admitted(self, gate: Gate | None) -> AsyncIterator[BoardClient]:
        """This client for one read whose admission ``gate`` rides its first round trip to
        this node, judged before any reply is used; judged alone by the end of the block if
        no round trip carried it, whatever happened in the block, so that a refused call
        answers its refusal. Itself when there is no gate. Inside ``operation()``."""
        if gate is None:
            yield self
            return
        rider = _GateRider(
            self._pool, timeout_seconds=self._timeout_seconds, redis=self._redis, gate=gate
        )
        try:
            yield rider
        except Exception:
            await rider.settle()
            raise
        await rider.settle()

    async def pass_gate(self, gate: Gate) -> None:
        """Run ``gate`` on its own round trip and judge it (for a call that reads before
        writing)."""
        async with self.operation():
            reply = await self._redis.execute_command(*gate.command)  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
        gate.judge(reply)

    def own_connection(self) -> aioredis.Redis[bytes]:
        """A redis-py client on one connection of its own to this node, without a socket
        timeout: for a read that blocks by design (the change feed's XREAD), which must not
        hold one of the pool's connections. Closing it closes its connection."""
        connection_class, settings = pool_settings(self._pool)
        own = aioredis.ConnectionPool(
            connection_class=connection_class,
            max_connections=1,
            **{**settings, "socket_timeout": None},
        )
        return aioredis.Redis.from_pool(own)  # type: ignore[attr-defined, no-any-return]  # types-redis 4.6 stubs lag redis-py 8

    async def aclose(self) -> None:
        await self._redis.aclose()  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8


class _GateRider(BoardClient):
    """A node's client for one read, sharing the node's pool and redis-py client, whose
    first round trip also carries the read's admission (``BoardClient.admitted``)."""

    __slots__ = ("_gate",)

    def __init__(
        self,
        pool: WaitingConnectionPool,
        *,
        timeout_seconds: float,
        redis: aioredis.Redis[bytes],
        gate: Gate,
    ) -> None:
        super().__init__(pool, timeout_seconds=timeout_seconds, redis=redis)
        self._gate: Gate | None = gate

    async def round_trip(
        self, commands: Sequence[Command], *, repeatable: bool = True
    ) -> list[Any]:
        gate, self._gate = self._gate, None
        if gate is None:
            return await super().round_trip(commands, repeatable=repeatable)
        # The gate first: a refused call raises its refusal before any reply is looked at.
        wire, replies = await self._pool.lend_answered(
            [gate.command, *commands], repeatable=repeatable
        )
        self._pool.return_wire(wire)
        gate.judge(first_error(replies[:1])[0])
        return first_error(replies[1:])

    async def settle(self) -> None:
        """Judge the gate now, if no round trip has carried it yet."""
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.judge((await super().round_trip([gate.command]))[0])


def board_client(
    url: str,
    *,
    pool_size: int = 64,
    pool_wait_seconds: float = 5.0,
    timeout_seconds: float = DEFAULT_REDIS_TIMEOUT_SECONDS,
    wire_class: type[WireConnection] = WireConnection,
) -> BoardClient:
    """The board's client of the single Redis at ``url``: ``pool_size`` connections, waited
    for in turn up to ``pool_wait_seconds``; each operation bounded by ``timeout_seconds``;
    transactions on ``wire_class`` connections."""
    pool = WaitingConnectionPool.from_url(
        url,
        **pool_options(
            pool_size, pool_wait_seconds, connect_seconds=timeout_seconds, wire_class=wire_class
        ),
    )
    return BoardClient(pool, timeout_seconds=timeout_seconds)


def pool_options(
    pool_size: int,
    pool_wait_seconds: float,
    *,
    connect_seconds: float,
    wire_class: type[WireConnection] = WireConnection,
) -> dict[str, Any]:
    """The board pool's options, for a single Redis's pool and each cluster node's.

    A connect may take as long as the operation around it (``connect_seconds``, the store's
    deadline): its timer runs on the event loop, and a loop busy with a burst of calls can
    be seconds late to see a reply Redis sent at once. A shorter bound would answer such a
    call `unavailable`, which says Redis is down."""
    return {
        "wait_seconds": pool_wait_seconds,
        "max_connections": pool_size,
        "wire_class": wire_class,
        # No socket timeout: each store operation has one deadline instead
        # (store/connection/_redis_errors.py), where redis-py put a timer around every command.
        "socket_timeout": None,
        "socket_connect_timeout": connect_seconds,
        "health_check_interval": 15,
        # Pooled connections opened before a Redis restart are dead; without a retry each
        # one failed a call with `unavailable` the first time it was picked, long after
        # Redis was back. One retry on a fresh connection, for connection errors only
        # (never timeouts, whose command may have run). A watched transaction is not
        # retried by redis-py: it raises WatchError and run_transaction starts it over,
        # reading again.
        "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
    }
