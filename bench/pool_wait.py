"""More tasks than Redis connections: what each way of waiting for a connection costs.

Each task runs GETs back to back on one embedded Redis through a client whose pool holds
64 connections: redis-py's plain pool (only with as many tasks as connections: with more it
fails at once), its BlockingConnectionPool, and the store's WaitingConnectionPool (a FIFO
semaphore in front of the plain pool, what the gateway uses). Reported per pool: GETs per
second (median of the rounds, interleaved) and the longest single GET, which shows whether
waiters are served in turn.

    python bench/pool_wait.py [--tasks 64 200] [--gets 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import redis.asyncio as aioredis
import uvloop
from _harness import Figures, embedded_redis, rounds

from blackboard_mcp.store.connection._pool import WaitingConnectionPool

POOL_SIZE = 64


def client_for(kind: str, url: str) -> Any:
    if kind == "plain":
        return aioredis.Redis.from_url(url, max_connections=POOL_SIZE)
    if kind == "blocking":
        pool: Any = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=POOL_SIZE, timeout=60
        )
    else:
        pool = WaitingConnectionPool.from_url(url, max_connections=POOL_SIZE, wait_seconds=60)
    return aioredis.Redis.from_pool(pool)


async def one_round(client: Any, tasks: int, gets: int) -> tuple[float, float]:
    worst = 0.0

    async def task() -> None:
        nonlocal worst
        for _ in range(gets):
            started = time.perf_counter()
            await client.get("bench-key")
            worst = max(worst, time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(tasks)))
    return tasks * gets / (time.perf_counter() - started), worst


async def run(url: str, args: argparse.Namespace) -> None:
    for tasks in args.tasks:
        kinds = ["plain", "blocking", "waiting"] if tasks <= POOL_SIZE else ["blocking", "waiting"]
        measured: Figures[str, tuple[float, float]] = Figures()
        for _, order in rounds(args.rounds, kinds):
            for kind in order:
                client = client_for(kind, url)
                measured.add(kind, await one_round(client, tasks, args.gets))
                await client.aclose()
        for kind in kinds:
            rate = measured.median(kind, lambda figure: figure[0])
            longest_ms = max(longest for _, longest in measured[kind]) * 1000
            print(
                f"{tasks:5d} tasks, {POOL_SIZE} connections, {kind:8s} pool: "
                f"{rate:8.0f} GET/s, longest GET {longest_ms:7.0f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, nargs="+", default=[64, 200])
    parser.add_argument("--gets", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with embedded_redis() as server:
        uvloop.run(run(server.url, args))


if __name__ == "__main__":
    main()
