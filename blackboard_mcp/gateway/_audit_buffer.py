"""Audit records written off the call's path, coalesced into one round trip per batch.

A call's audit record used to cost the call a round trip of its own before the reply went
out. Here the call only queues its record; one writer task stores whatever has queued up
while its previous batch was in flight, or during a short linger after the first record
of a batch (``linger_seconds``, as a producer's linger in Kafka): with about one record per
round trip the writer was 5% of the gateway's CPU under write load, and the linger took a
third or so of that away (bench/RESULTS.md). It ends early once ``max_batch`` records wait,
and at a stop.

The price: records still queued when the process is killed outright are lost (a clean stop
writes them). When Redis is down a batch cannot be written and is dropped with a warning,
and at most ``max_pending`` records wait; the oldest go first. The linger widens the window
of records a killed process loses by its length, never a call's latency: the call does not
wait for its record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator

from blackboard_mcp.auth import AuditRecord, BatchAuditSink

log = logging.getLogger(__name__)


class BufferedAudit:
    """An ``AuditSink`` that queues records for a background writer."""

    def __init__(
        self,
        *,
        sink: BatchAuditSink,
        max_batch: int = 256,
        max_pending: int = 10_000,
        linger_seconds: float = 0.0,
    ) -> None:
        self._sink = sink
        self._max_batch = max_batch
        self._linger = linger_seconds
        self._nap: asyncio.Future[None] | None = None
        self._pending: deque[AuditRecord] = deque(maxlen=max_pending)
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._closing = False
        self.dropped = 0

    async def record(self, record: AuditRecord) -> None:
        if self._writer is None:
            # Not running (no lifespan, e.g. an app under test): write through.
            await self._sink.record(record)
            return
        if len(self._pending) == self._pending.maxlen:
            self.dropped += 1
        self._pending.append(record)
        self._wake.set()
        if self._nap is not None and len(self._pending) >= self._max_batch:
            _end(self._nap)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the writer for the life of the block; on exit, write what is queued."""
        self._closing = False
        self._writer = asyncio.create_task(self._write_forever(), name="audit-writer")
        try:
            yield
        finally:
            self._closing = True
            self._wake.set()
            if self._nap is not None:
                _end(self._nap)
            writer, self._writer = self._writer, None
            await writer

    async def _write_forever(self) -> None:
        while True:
            await self._wake.wait()
            if self._linger and not self._closing and len(self._pending) < self._max_batch:
                await self._linger_a_while()
            self._wake.clear()
            while self._pending:
                count = min(len(self._pending), self._max_batch)
                batch = [self._pending.popleft() for _ in range(count)]
                try:
                    await self._sink.record_many(batch)
                except Exception:
                    # An audit failure must never fail a call; it is logged instead.
                    self.dropped += len(batch)
                    log.warning("%d audit records were not written", len(batch), exc_info=True)
                    if self._closing:
                        self._pending.clear()
            if self._closing:
                return

    async def _linger_a_while(self) -> None:
        """Wait ``linger_seconds``, or less if a stop or a full batch ends it."""
        loop = asyncio.get_running_loop()
        self._nap = nap = loop.create_future()
        timer = loop.call_later(self._linger, _end, nap)
        try:
            await nap
        finally:
            timer.cancel()
            self._nap = None


def _end(nap: asyncio.Future[None]) -> None:
    if not nap.done():
        nap.set_result(None)
