"""Map redis-py's exceptions to the store's, once, at the boundary."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from redis import exceptions as rx

from ._errors import Overloaded, Unavailable


@contextlib.asynccontextmanager
async def mapped_redis_errors() -> AsyncIterator[None]:
    try:
        yield
    except rx.WatchError:
        raise
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
