"""Acknowledged writes lost when a Redis Cluster primary is SIGKILLed and its replica promoted.

A cluster of 3 primaries with one replica each is started from the wheels (as the tests do).
Concurrent writers create distinct notes through the store (``Board``, the code the gateway
runs) in workspaces that live on one primary; that primary is SIGKILLed while they write, its
replica is promoted (cluster-node-timeout 1 s), and the writers go on until writes succeed
again. Then every acknowledged note is looked for. Once with BB_WAIT_REPLICAS=0 (replication
is asynchronous: a write the primary acknowledged but had not yet sent to its replica is
lost) and once with 1 (a write is acknowledged only when its replica has it; the rest answer
`unconfirmed` or `unavailable`). Reported per run: writes acknowledged, lost, refused during
the switch, and the time from the kill to the first write that succeeded again.

    python bench/cluster_failover_loss.py [--writers 16] [--before 2.0] [--after 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter

from _harness import scratch

from blackboard_mcp.store import Board, BoardLimits, GetState, StoreError, UpdateState
from blackboard_mcp.testing import LocalCluster


async def run(
    wait_replicas: int, *, writers: int, before: float, after: float
) -> dict[str, object]:
    with scratch("bb-loss-") as root:
        return await _run_on(LocalCluster(root).start(), wait_replicas, writers, before, after)


async def _run_on(
    cluster: LocalCluster, wait_replicas: int, writers: int, before: float, after: float
) -> dict[str, object]:
    try:
        victim = cluster.nodes[1]
        workspaces = [
            w for w in (f"loss-{i}" for i in range(400)) if cluster.owner_of(f"{{{w}}}") is victim
        ][:writers]
        board = Board.from_url(
            cluster.url,
            limits=BoardLimits(wait_replicas=wait_replicas, wait_timeout_ms=1000),
        )
        await board.start()
        acked: list[str] = []
        refused: Counter[str] = Counter()
        state = {"killed_at": 0.0, "back_at": 0.0, "stop": False}

        async def writer(ws: str) -> None:
            n = 0
            while not state["stop"]:
                uri = f"bb://{ws}/t/n{n}"
                n += 1
                started = time.monotonic()
                try:
                    await board.update_state(
                        UpdateState.parse(
                            {"uri": uri, "digest": "d", "body": "b", "expect_version": 0}
                        ),
                        author="w",
                    )
                except StoreError as exc:
                    refused[exc.code] += 1
                    if exc.code == "unconfirmed" and started > state["killed_at"] > 0:
                        # Applied on the new primary, which has no replica left to confirm it.
                        state["back_at"] = state["back_at"] or time.monotonic()
                    await asyncio.sleep(0.05)
                    continue
                acked.append(uri)
                # A write that was already on its way when the primary died does not count.
                if state["killed_at"] and started > state["killed_at"] and not state["back_at"]:
                    state["back_at"] = time.monotonic()

        tasks = [asyncio.create_task(writer(ws)) for ws in workspaces]
        await asyncio.sleep(before)
        victim.kill()
        state["killed_at"] = time.monotonic()
        acked_before_kill = len(acked)
        deadline = time.monotonic() + 60
        while not state["back_at"] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(after)
        state["stop"] = True
        await asyncio.gather(*tasks)
        await board.close()

        reader = Board.from_url(cluster.url)
        await reader.start()
        lost = 0
        for uri in acked:
            found = await reader.get_state(GetState.parse({"uris": [uri]}))
            if not found["items"] or found["items"][0].get("version") != 1:
                lost += 1
        await reader.close()
        return {
            "wait_replicas": wait_replicas,
            "acknowledged": len(acked),
            "acknowledged_before_kill": acked_before_kill,
            "lost": lost,
            "refused": dict(refused),
            "kill_to_first_success_s": round(float(state["back_at"]) - float(state["killed_at"]), 2)
            if state["back_at"]
            else None,
        }
    finally:
        cluster.wipe()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--before", type=float, default=2.0)
    parser.add_argument("--after", type=float, default=1.0)
    args = parser.parse_args()
    for wait in (0, 1):
        print(asyncio.run(run(wait, writers=args.writers, before=args.before, after=args.after)))


if __name__ == "__main__":
    main()
