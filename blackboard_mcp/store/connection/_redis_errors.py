"""Map redis-py's exceptions to the store's, once, at the boundary; and bound the wait.

Every store operation runs its Redis commands inside ``mapped_redis_errors(seconds)``
(through the operation() of the client it runs on: store/connection/_board_client.py), which
is also where a hung Redis is noticed: the block has that client's ``timeout_seconds`` to
finish (``BB_REDIS_TIMEOUT_SECONDS``, 5 by default), or the operation answers ``Unavailable``.
A long command (an import, an export, a sweep) opens one operation per batch, so the bound
holds each batch, not the whole command. One deadline per operation replaces redis-py's socket
timeout, which wrapped every command's write in ``asyncio.wait_for`` (a task each) and its
read in ``asyncio.timeout``: about a fifth of the CPU of a compare-and-swap write.

The deadlines are not ``asyncio.timeout``s either: that puts a timer on the loop per
operation (under uvloop a libuv timer made, started and stopped), about 8 us of a write's
400. Here an operation is an entry in its loop's ``_Deadlines``, and one timer, running
only while some operation is, checks them all every ``_TICK_SECONDS``: a deadline fires up
to that much late, which against 5 s is nothing.
"""

from __future__ import annotations

import asyncio
import weakref
from contextvars import ContextVar
from types import TracebackType

from redis import exceptions as rx

from .._errors import Overloaded, StoreError, Unavailable

# As long as a Redis command could take before redis-py's socket timeout gave up (5 s).
DEFAULT_REDIS_TIMEOUT_SECONDS = 5.0


# How often the running operations' deadlines are checked, so how late one may fire.
_TICK_SECONDS = 0.05

# Set by the connection pool (store/connection/_pool.py) when a deadline ran out while the operation
# was still waiting for a connection: Redis answers, this process is busy.
deadline_hit_in_pool: ContextVar[bool] = ContextVar("bb_deadline_hit_in_pool", default=False)


class _Deadlines:
    """The deadlines of the operations running on one event loop, and the timer checking them.

    A task has one entry, its outermost operation's: an operation nested in another (a
    store call made by another) would end later, so the outer deadline always fires first.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._due: dict[asyncio.Task[object], float] = {}
        self._fired: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None

    def start(self, task: asyncio.Task[object], seconds: float) -> bool:
        """Give ``task`` a deadline ``seconds`` from now; False if it already has one."""
        if task in self._due:
            return False
        self._due[task] = self._loop.time() + seconds
        if self._timer is None:
            self._timer = self._loop.call_later(_TICK_SECONDS, self._check)
        return True

    def finish(self, task: asyncio.Task[object]) -> bool:
        """Drop ``task``'s deadline; True if it had fired (the task was cancelled for it)."""
        del self._due[task]
        if task in self._fired:
            self._fired.discard(task)
            return True
        return False

    def _check(self) -> None:
        self._timer = None
        now = self._loop.time()
        for task, due in self._due.items():
            if due <= now and task not in self._fired:
                self._fired.add(task)
                task.cancel()
        if self._due:
            self._timer = self._loop.call_later(_TICK_SECONDS, self._check)


# One per event loop; a loop that is gone takes its entry with it.
_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = (
    weakref.WeakKeyDictionary()
)


def _deadlines(loop: asyncio.AbstractEventLoop) -> _Deadlines:
    deadlines = _loops.get(loop)
    if deadlines is None:
        deadlines = _loops[loop] = _Deadlines(loop)
    return deadlines


class RedisOperation:
    """``async with``: one store operation's deadline, and its errors mapped to the store's.

    Cancellation follows ``asyncio.timeout``: the task is cancelled when the deadline fires
    and the cancellation becomes a ``TimeoutError`` at the block's end, unless somebody else
    cancelled the task too, whose cancellation then goes on.
    """

    __slots__ = ("_cancelling", "_deadlines", "_owner", "_task", "_timeout_seconds")

    def __init__(self, timeout_seconds: float) -> None:
        self._timeout_seconds = timeout_seconds

    async def __aenter__(self) -> None:
        if deadline_hit_in_pool.get():
            deadline_hit_in_pool.set(False)  # left over from a cancelled call in this context
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a store operation runs in a task")
        self._task = task
        self._deadlines = _deadlines(task.get_loop())
        self._cancelling = task.cancelling()
        self._owner = self._deadlines.start(task, self._timeout_seconds)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if (
            self._owner
            and self._deadlines.finish(self._task)
            and self._task.uncancel() <= self._cancelling
            and isinstance(exc, asyncio.CancelledError)
        ):
            timed_out = TimeoutError()
            timed_out.__cause__ = exc
            exc = timed_out
        if exc is None:
            return
        mapped = _mapped(exc, self._timeout_seconds)
        if mapped is not None:
            raise mapped from exc


def mapped_redis_errors(timeout_seconds: float) -> RedisOperation:
    """One store operation of at most ``timeout_seconds``, redis-py's errors mapped to ours."""
    return RedisOperation(timeout_seconds)


def _mapped(exc: BaseException, timeout_seconds: float) -> StoreError | None:
    """The store's error for ``exc`` raised inside an operation; None to let it through."""
    if isinstance(exc, rx.WatchError):
        return None
    if isinstance(exc, TimeoutError):
        # A cancelled read closes its connection (the wire closes itself on any interruption
        # mid-round-trip), so no later call can read this one's late reply.
        if deadline_hit_in_pool.get():
            deadline_hit_in_pool.set(False)
            return Overloaded("no Redis connection came free in time; the board is busy")
        return Unavailable(f"the board's Redis did not answer within {timeout_seconds:g} s")
    if isinstance(exc, rx.MaxConnectionsError):  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8
        # Every pooled connection stayed busy for the pool's whole wait (store/connection/_pool.py):
        # Redis answers, this process has more calls in hand than connections.
        return Overloaded("no Redis connection came free in time; the board is busy")
    if isinstance(exc, rx.BusyLoadingError):
        return Unavailable("the board's Redis is loading its data (it restarted)")
    if isinstance(exc, (rx.ConnectionError, rx.TimeoutError, OSError)):
        return Unavailable("the board's Redis is unreachable")
    if isinstance(exc, rx.ResponseError):
        # Server-side refusals such as OOM or a read-only replica are operator problems.
        return Unavailable(f"the board's Redis refused the command: {exc}")
    return None
