"""Running ``summarize_source`` off the event loop, with a deadline.

Opening and reading a file are blocking system calls, and the file system under the source
root is not ours: a hung network mount or a FUSE file system can stall a read for as long
as it likes. So reads run on a few daemon threads of this reader's own (started as first
needed, at most ``max_threads``, then kept: a new thread per read cost several times as
much, bench/source_read.py), and the caller waits at most ``timeout_seconds``. A read that
overruns is abandoned, not killed (threads cannot be); it keeps its thread until it
returns, so a file system that hangs every read ties up ``max_threads`` threads and no
more, and later calls answer ``unavailable`` rather than queueing without end. Daemon
threads, so such a read never holds up the process's exit (the standard
ThreadPoolExecutor joins its threads at exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

from .._errors import Unavailable
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
        self._max_threads = max_threads
        # A slot is taken before a job is queued and given back by the thread that ran it,
        # so the queue never holds more jobs than there are threads to take them.
        self._slots = threading.BoundedSemaphore(max_threads)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads = 0
        self._lock = threading.Lock()

    async def summarize(self, source_path: str) -> SourceSummary:
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
        try:
            self._ensure_thread()
        except BaseException:
            self._slots.release()
            raise
        self._jobs.put(_Job(loop, result, source_path))
        try:
            async with asyncio.timeout_at(deadline):
                # shield: the timeout must not cancel the future the thread will settle.
                return await asyncio.shield(result)
        except TimeoutError:
            raise self._overdue() from None
        finally:
            # Timed out or cancelled: the thread's late answer is dropped, not left unread.
            result.cancel()

    def _ensure_thread(self) -> None:
        with self._lock:
            # Holding a slot means at most max_threads - 1 other jobs are queued or running.
            if self._threads >= self._max_threads:
                return
            self._threads += 1
        threading.Thread(target=self._serve, daemon=True, name="source-read").start()

    def close(self) -> None:
        """Let the idle threads end; a read still running ends when it returns."""
        with self._lock:
            threads, self._threads = self._threads, self._max_threads  # no new ones
        for _ in range(threads):
            self._jobs.put(None)

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                if job.result.cancelled():  # the caller gave up while the job was queued
                    continue
                summary = summarize_source(
                    job.source_path, root=self._root, max_bytes=self._max_bytes
                )
            except Exception as exc:  # every outcome goes back to the awaiting call
                _settle(job, None, exc)
            else:
                _settle(job, summary, None)
            finally:
                self._slots.release()

    def _overdue(self) -> Unavailable:
        return Unavailable(
            f"reading source_path took longer than {self._timeout:g} s",
            hint="the file system under the source root is slow or hung; retry later",
        )


@dataclass(frozen=True)
class _Job:
    loop: asyncio.AbstractEventLoop
    result: asyncio.Future[SourceSummary]
    source_path: str


def _settle(job: _Job, summary: SourceSummary | None, exc: BaseException | None) -> None:
    result = job.result

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
        job.loop.call_soon_threadsafe(apply)
