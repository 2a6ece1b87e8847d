"""Running ``summarize_source`` off the event loop, with a deadline.

Opening and reading a file are blocking system calls, and the file system under the source
root is not ours: a hung network mount or a FUSE file system can stall a read for as long
as it likes. So each read runs on its own daemon thread, at most ``max_threads`` at once,
and the caller waits at most ``timeout_seconds`` for it. A read that overruns is abandoned,
not killed (threads cannot be); it keeps its slot until it returns, so a file system that
hangs every read uses up ``max_threads`` threads and no more, and later calls answer
``unavailable`` rather than queueing without end. Daemon threads, so such a read never
holds up the process's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path

from ._errors import Unavailable
from ._source import SourceSummary, summarize_source


class SourceReader:
    """Summarises ``source_path`` files on worker threads, never on the event loop."""

    def __init__(
        self,
        *,
        root: Path | None,
        max_bytes: int,
        timeout_seconds: float,
        max_threads: int = 4,
    ) -> None:
        self._root = root
        self._max_bytes = max_bytes
        self._timeout = timeout_seconds
        self._slots = threading.BoundedSemaphore(max_threads)

    async def summarize(self, source_path: object) -> SourceSummary:
        """The file's summary, or the store error that refused it, within the deadline."""
        loop = asyncio.get_running_loop()
        result: asyncio.Future[SourceSummary] = loop.create_future()
        deadline = loop.time() + self._timeout
        while not self._slots.acquire(blocking=False):
            # Every thread is busy with a read that has not returned: wait a little, since
            # blocking on the semaphore here would block the loop.
            if loop.time() >= deadline:
                raise self._overdue()
            await asyncio.sleep(0.01)
        thread = threading.Thread(
            target=self._work, args=(loop, result, source_path), daemon=True, name="source-read"
        )
        try:
            thread.start()
        except BaseException:
            self._slots.release()
            raise
        try:
            async with asyncio.timeout_at(deadline):
                # shield: the timeout must not cancel the future the thread will settle.
                return await asyncio.shield(result)
        except TimeoutError:
            raise self._overdue() from None
        finally:
            # Timed out or cancelled: the thread's late answer is dropped, not left unread.
            result.cancel()

    def _work(
        self,
        loop: asyncio.AbstractEventLoop,
        result: asyncio.Future[SourceSummary],
        source_path: object,
    ) -> None:
        try:
            summary = summarize_source(source_path, root=self._root, max_bytes=self._max_bytes)
        except Exception as exc:  # every outcome goes back to the awaiting call
            _settle(loop, result, None, exc)
        else:
            _settle(loop, result, summary, None)
        finally:
            self._slots.release()

    def _overdue(self) -> Unavailable:
        return Unavailable(
            f"reading source_path took longer than {self._timeout:g} s",
            hint="the file system under the source root is slow or hung; retry later",
        )


def _settle(
    loop: asyncio.AbstractEventLoop,
    result: asyncio.Future[SourceSummary],
    summary: SourceSummary | None,
    exc: BaseException | None,
) -> None:
    def apply() -> None:
        if result.done():  # the caller gave up (timeout or cancellation)
            return
        if exc is not None:
            result.set_exception(exc)
        else:
            assert summary is not None
            result.set_result(summary)

    # RuntimeError: the loop closed while the file was being read; nobody is waiting.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(apply)
