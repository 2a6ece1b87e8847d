"""Map redis-py's exceptions to the store's, once, at the boundary; and bound the wait.

Every store operation runs its Redis commands inside ``mapped_redis_errors()``, which is
also where a hung Redis is noticed: the block has ``DEADLINE_SECONDS`` to finish, or the
operation answers ``Unavailable``. One timer per operation replaces redis-py's socket
timeout, which wrapped every command's write in ``asyncio.wait_for`` (a task each) and its
read in ``asyncio.timeout``: about a fifth of the CPU of a compare-and-swap write.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar

from redis import exceptions as rx

from ._errors import Overloaded, Unavailable

# As long as a Redis command could take before redis-py's socket timeout gave up (5 s).
DEADLINE_SECONDS = 5.0

# Set by the connection pool (store/_pool.py) when a deadline ran out while the operation
# was still waiting for a connection: Redis answers, this process is busy.
deadline_hit_in_pool: ContextVar[bool] = ContextVar("bb_deadline_hit_in_pool", default=False)


@contextlib.asynccontextmanager
async def mapped_redis_errors() -> AsyncIterator[None]:
    if deadline_hit_in_pool.get():
        deadline_hit_in_pool.set(False)  # left over from a cancelled call in this context
    try:
        async with asyncio.timeout(DEADLINE_SECONDS):
            yield
    except rx.WatchError:
        raise
    except TimeoutError as exc:
        # A cancelled read closes its connection (redis-py disconnects on any exception
        # mid-read), so no later call can read this one's late reply.
        if deadline_hit_in_pool.get():
            deadline_hit_in_pool.set(False)
            raise Overloaded("no Redis connection came free in time; the board is busy") from exc
        raise Unavailable(
            f"the board's Redis did not answer within {DEADLINE_SECONDS:g} s"
        ) from exc
    except rx.MaxConnectionsError as exc:  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8
        # Every pooled connection stayed busy for the pool's whole wait (store/_pool.py):
        # Redis answers, this process has more calls in hand than connections.
        raise Overloaded("no Redis connection came free in time; the board is busy") from exc
    except (rx.ConnectionError, rx.TimeoutError, rx.BusyLoadingError) as exc:
        raise Unavailable("the board's Redis is unreachable") from exc
    except OSError as exc:
        raise Unavailable("the board's Redis is unreachable") from exc
    except rx.ResponseError as exc:
        # Server-side refusals such as OOM or a read-only replica are operator problems.
        raise Unavailable(f"the board's Redis refused the command: {exc}") from exc
