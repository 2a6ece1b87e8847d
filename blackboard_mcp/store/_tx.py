"""The one way the store runs WATCH/MULTI/EXEC.

redis-py's own ``transaction()`` helper retries forever on WatchError; under heavy contention
that turns into a livelock with no signal to the caller. Here retries are bounded, with a
short jittered back-off, and exhaustion raises ``Contended``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from ._errors import Contended
from ._redis_errors import mapped_redis_errors

T = TypeVar("T")

# The body reads under WATCH (the pipeline is in immediate mode), calls ``pipe.multi()``,
# queues its writes and returns a function that turns EXEC's replies into the result.
TransactionBody = Callable[["Pipeline[bytes]"], Awaitable[Callable[[list[Any]], T]]]


async def run_transaction(
    client: aioredis.Redis[bytes],
    watch: Sequence[str],
    body: TransactionBody[T],
    *,
    max_retries: int,
) -> T:
    """Run ``body`` until EXEC succeeds, at most ``max_retries + 1`` times."""
    async with mapped_redis_errors():
        for attempt in range(max_retries + 1):
            async with client.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(*watch)
                    finish = await body(pipe)
                    if not pipe.explicit_transaction:
                        # The body decided not to write (e.g. a CAS refusal raised before
                        # MULTI would not get here); nothing queued means nothing to run.
                        await pipe.reset()
                        return finish([])
                    replies = await pipe.execute()
                    return finish(replies)
                except WatchError:
                    # Another client touched a watched key between our read and EXEC.
                    # The pipeline context resets the connection's WATCH state on exit.
                    pass
            await asyncio.sleep(random.uniform(0, 0.001 * 2 ** min(attempt, 8)))
    raise Contended(f"the write lost {max_retries + 1} races in a row to other writers")
