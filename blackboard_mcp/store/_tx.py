"""The one way the store runs WATCH/MULTI/EXEC.

redis-py's own ``transaction()`` helper retries forever on WatchError; under heavy contention
that turns into a livelock with no signal to the caller. Here retries are bounded, with a
short jittered back-off, and exhaustion raises ``Contended``.

The body's first reads travel with the WATCH in one round trip (``first_reads``): a
compare-and-swap write is then two round trips (WATCH+read, MULTI..EXEC) where redis-py's
immediate mode took three. Redis runs a connection's commands in order, so the reads still
happen after the WATCH, and anything that changes the keys after them fails the EXEC.

With ``ReplicaWait`` a committed transaction is acknowledged only once ``WAIT`` has seen it
reach that many replicas; otherwise ``Unconfirmed`` (the write may survive or be lost).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.exceptions import ResponseError, WatchError

from ._errors import Contended, Unconfirmed
from ._redis_errors import mapped_redis_errors

T = TypeVar("T")

# The body gets the replies to ``first_reads`` (raw: no response callbacks) and may read more
# under WATCH (the pipeline is in immediate mode); then it calls ``pipe.multi()``, queues its
# writes and returns a function that turns EXEC's replies into the result.
TransactionBody = Callable[["Pipeline[bytes]", list[Any]], Awaitable[Callable[[list[Any]], T]]]
Command = tuple[Any, ...]


@dataclass(frozen=True)
class ReplicaWait:
    """Acknowledge a write once ``replicas`` replicas have it, waiting at most ``timeout_ms``."""

    replicas: int
    timeout_ms: int


async def execute_acknowledged(pipe: Pipeline[bytes], wait: ReplicaWait | None) -> list[Any]:
    """EXEC the queued transaction, then (with ``wait``) WAIT for the replicas to have it.

    WAIT counts the replicas that have received *this connection's* writes, so it must run
    on the connection that ran EXEC; ``Pipeline.execute()`` hands that connection back to
    the pool before returning, so the transaction is run through the pipeline's own
    ``_execute_transaction`` on the connection it holds (the WAIT tests guard this).
    """
    if wait is None or wait.replicas <= 0:
        executed: list[Any] = await pipe.execute()
        return executed
    conn = pipe.connection
    if conn is None:
        conn = await pipe.connection_pool.get_connection()
        pipe.connection = conn
    try:
        replies: list[Any] = await pipe._execute_transaction(conn, pipe.command_stack, True)  # type: ignore[attr-defined]  # see above
        acked = int(await pipe.immediate_execute_command("WAIT", wait.replicas, wait.timeout_ms))  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
    finally:
        await pipe.reset()
    if acked < wait.replicas:
        raise Unconfirmed(
            f"the write committed on the primary but reached {acked} of {wait.replicas} "
            f"replicas within {wait.timeout_ms} ms"
        )
    return replies


async def run_transaction(
    client: aioredis.Redis[bytes],
    watch: Sequence[str],
    body: TransactionBody[T],
    *,
    max_retries: int,
    first_reads: Sequence[Command] = (),
    wait: ReplicaWait | None = None,
) -> T:
    """Run ``body`` until EXEC succeeds, at most ``max_retries + 1`` times."""
    async with mapped_redis_errors():
        for attempt in range(max_retries + 1):
            async with client.pipeline(transaction=True) as pipe:
                try:
                    first = await _watch(pipe, watch, first_reads)
                    finish = await body(pipe, first)
                    if not pipe.explicit_transaction:
                        # The body decided not to write (e.g. a CAS refusal raised before
                        # MULTI would not get here); nothing queued means nothing to run.
                        await pipe.reset()
                        return finish([])
                    replies = await execute_acknowledged(pipe, wait)
                    return finish(replies)
                except WatchError:
                    # Another client touched a watched key between our read and EXEC.
                    # The pipeline context resets the connection's WATCH state on exit.
                    pass
            await asyncio.sleep(random.uniform(0, 0.001 * 2 ** min(attempt, 8)))
    raise Contended(f"the write lost {max_retries + 1} races in a row to other writers")


async def _watch(
    pipe: Pipeline[bytes], watch: Sequence[str], reads: Sequence[Command]
) -> list[Any]:
    """WATCH ``watch`` and run ``reads`` in one round trip on the pipeline's connection.

    This is what ``pipe.watch()`` followed by each read in immediate mode does, pipelined:
    the connection becomes the pipeline's (``reset()`` gives it back and UNWATCHes), and a
    connection that fails before anything is watched is retried once on a fresh one, by the
    pool's retry policy, as redis-py does for a first WATCH.
    """
    conn = pipe.connection
    if conn is None:
        conn = await pipe.connection_pool.get_connection()
        pipe.connection = conn
    packed = conn.pack_commands([("WATCH", *watch), *reads])

    async def send() -> list[Any]:
        await conn.send_packed_command(packed)
        replies: list[Any] = []
        error: ResponseError | None = None
        for _ in range(1 + len(reads)):
            # Every reply is read before an error is raised, so the connection stays in step.
            try:
                replies.append(await conn.read_response())
            except ResponseError as exc:
                error = error or exc
                replies.append(None)
        if error is not None:
            raise error
        return replies[1:]

    async def failed(_error: Exception) -> None:
        await conn.disconnect()

    replies: list[Any] = await conn.retry.call_with_retry(send, failed)
    pipe.watching = True
    return replies
