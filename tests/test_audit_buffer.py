"""The audit buffer: records leave the call's path, keep their order and survive a clean stop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from blackboard_mcp.auth import AuditRecord
from blackboard_mcp.gateway._audit_buffer import BufferedAudit


def _record(n: int) -> AuditRecord:
    return AuditRecord(
        at=float(n),
        workspace="ws",
        subject="agent",
        tool="get_state",
        addresses=(),
        outcome="ok",
        duration_ms=1.0,
        request_id=f"r{n}",
    )


class SlowSink:
    """Records what it was given, one batch at a time, each write taking a while."""

    def __init__(self, *, fail_first: int = 0) -> None:
        self.batches: list[list[str]] = []
        self.fail_first = fail_first

    async def record(self, record: AuditRecord) -> None:
        await self.record_many([record])

    async def record_many(self, records: Sequence[AuditRecord]) -> None:
        await asyncio.sleep(0.01)
        if self.fail_first:
            self.fail_first -= 1
            raise ConnectionError("store down")
        self.batches.append([r.request_id for r in records])


async def test_records_written_while_a_batch_is_in_flight_coalesce_in_order() -> None:
    sink = SlowSink()
    buffer = BufferedAudit(sink=sink)
    async with buffer.running():
        for n in range(50):
            await buffer.record(_record(n))
            if n % 10 == 0:
                await asyncio.sleep(0)
    written = [rid for batch in sink.batches for rid in batch]
    assert written == [f"r{n}" for n in range(50)]
    # Fewer round trips than records: that is the point of the buffer.
    assert len(sink.batches) < 50


async def test_a_clean_stop_writes_everything_still_queued() -> None:
    sink = SlowSink()
    buffer = BufferedAudit(sink=sink)
    async with buffer.running():
        for n in range(5):
            await buffer.record(_record(n))
    assert [rid for batch in sink.batches for rid in batch] == [f"r{n}" for n in range(5)]


async def test_a_failed_write_is_dropped_and_counted_never_raised_to_the_caller() -> None:
    sink = SlowSink(fail_first=1)
    buffer = BufferedAudit(sink=sink)
    async with buffer.running():
        await buffer.record(_record(0))
        await asyncio.sleep(0.05)
        await buffer.record(_record(1))
    assert buffer.dropped == 1
    assert sink.batches == [["r1"]]


async def test_without_a_running_writer_records_are_written_through() -> None:
    sink = SlowSink()
    await BufferedAudit(sink=sink).record(_record(9))
    assert sink.batches == [["r9"]]


async def test_the_queue_is_bounded_and_drops_the_oldest() -> None:
    sink = SlowSink()
    buffer = BufferedAudit(sink=sink, max_pending=3)
    async with buffer.running():
        # Queuing never yields, so the writer cannot run in between and the queue overflows.
        for n in range(6):
            await buffer.record(_record(n))
    assert [rid for batch in sink.batches for rid in batch] == ["r3", "r4", "r5"]
    assert buffer.dropped == 3


class FastSink(SlowSink):
    """A sink whose writes take no time: without a linger every record is a batch of its own."""

    async def record_many(self, records: Sequence[AuditRecord]) -> None:
        self.batches.append([r.request_id for r in records])


async def test_records_of_calls_finishing_within_the_linger_share_one_round_trip() -> None:
    sink = FastSink()
    buffer = BufferedAudit(sink=sink, linger_seconds=0.05)
    async with buffer.running():
        for n in range(5):
            await buffer.record(_record(n))
            await asyncio.sleep(0.001)  # calls ending a little apart, each yielding the loop
        await asyncio.sleep(0.1)
        await buffer.record(_record(5))
    assert sink.batches == [["r0", "r1", "r2", "r3", "r4"], ["r5"]]


async def test_a_clean_stop_does_not_wait_out_the_linger_to_write_what_is_queued() -> None:
    sink = FastSink()
    buffer = BufferedAudit(sink=sink, linger_seconds=30.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with buffer.running():
        await buffer.record(_record(0))
        await asyncio.sleep(0)
    assert sink.batches == [["r0"]]
    assert loop.time() - started < 1.0
