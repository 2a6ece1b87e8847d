"""The retention sweeper: each gateway process tries, one of them at a time sweeps."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator

from blackboard_mcp.auth import AuditRecord, AuditSink
from blackboard_mcp.store import Board, failure_reason

log = logging.getLogger(__name__)

SUBJECT = "retention"


async def _sweep_once(board: Board, audit: AuditSink, owner: str, interval: float) -> None:
    started = time.monotonic()
    # The lease outlives a few missed periods (a slow sweep, a busy loop) before another
    # process may take over; a process that stops renewing it hands over within that time.
    swept = await board.sweep_retention(owner=owner, lease_seconds=3 * interval)
    for result in swept or []:
        log.info(
            "retention: deleted %d notes of %s/%s",
            len(result.members),
            result.workspace,
            result.topic,
        )
        await audit.record(
            AuditRecord(
                at=time.time(),
                workspace=result.workspace,
                subject=SUBJECT,
                tool="retention.sweep",
                addresses=(f"bb://{result.workspace}/{result.topic}/",),
                outcome=f"deleted {len(result.members)}",
                duration_ms=(time.monotonic() - started) * 1000,
                request_id=owner,
            )
        )


@contextlib.asynccontextmanager
async def retention_sweeper(
    board: Board, audit: AuditSink, *, interval: float
) -> AsyncIterator[None]:
    """Sweep every ``interval`` seconds in the background while the block runs."""
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    async def loop() -> None:
        while True:
            try:
                await _sweep_once(board, audit, owner, interval)
            except Exception as exc:  # a Redis outage must not end the loop; the next try may work
                log.warning("retention sweep failed: %s", failure_reason(exc))
            await asyncio.sleep(interval)

    task = asyncio.create_task(loop(), name="retention-sweeper")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
