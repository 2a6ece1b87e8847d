"""Compare-and-swap holds across processes: no increment of a shared counter is ever lost."""

from __future__ import annotations

import asyncio
import multiprocessing

import pytest

from blackboard_mcp.store import Board, Conflict, Contended, GetState, UpdateState

PROCESSES = 8
INCREMENTS = 50
COUNTER = "bb://ws/t/counter"

pytestmark = pytest.mark.slow


async def _increment_many(url: str, times: int) -> int:
    board = Board.from_url(url)
    conflicts = 0
    try:
        for _ in range(times):
            while True:
                response = await board.get_state(
                    GetState.parse({"uris": [COUNTER], "mode": "full"})
                )
                [item] = response["items"]
                try:
                    await board.update_state(
                        UpdateState.parse(
                            {
                                "uri": COUNTER,
                                "digest": "A shared counter.",
                                "body": str(int(item["body"]) + 1),
                                "expect_version": item["version"],
                            }
                        ),
                        author="counter",
                    )
                    break
                except (Conflict, Contended):
                    conflicts += 1
    finally:
        await board.close()
    return conflicts


def increment_worker(url: str, times: int) -> int:
    """Entry point of one spawned process: its own event loop, its own Board."""
    return asyncio.run(_increment_many(url, times))


async def test_eight_processes_incrementing_one_counter_lose_no_update(
    board: Board, redis_url: str
) -> None:
    await board.update_state(
        UpdateState.parse(
            {"uri": COUNTER, "digest": "A shared counter.", "body": "0", "expect_version": 0}
        ),
        author="setup",
    )
    context = multiprocessing.get_context("spawn")
    with context.Pool(PROCESSES) as pool:
        pending = pool.starmap_async(increment_worker, [(redis_url, INCREMENTS)] * PROCESSES)
        conflicts = await asyncio.to_thread(pending.get, 120)

    response = await board.get_state(GetState.parse({"uris": [COUNTER], "mode": "full"}))
    [item] = response["items"]
    assert item["body"] == str(PROCESSES * INCREMENTS)
    assert item["version"] == PROCESSES * INCREMENTS + 1
    # The processes really did race: some writes were refused and retried.
    assert sum(conflicts) > 0
    changes = await board.changes("ws", count=1000)
    assert len(changes) == PROCESSES * INCREMENTS + 1
