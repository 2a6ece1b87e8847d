"""Calls/s and p50/p99 of update_state, get_state and search_keys: raw redis-py, the store
directly, and through the gateway (MCP over HTTP), with 1 and 16 concurrent clients, in one
run on one embedded Redis. Prints a table and the gateway/store ratio.

    python bench/gateway_vs_store.py [--seconds 3] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import orjson
import redis.asyncio as aioredis

from blackboard_mcp.auth import TokenIssuer, keys_from_settings
from blackboard_mcp.settings import Settings
from blackboard_mcp.store import Board, EmbeddedRedis, free_port

SECRET = "bench-secret-" + "y" * 40
WS = "bench"


async def measure(
    op: Callable[[int, int], Awaitable[object]], clients: int, seconds: float
) -> tuple[float, float, float]:
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def client(cid: int) -> None:
        i = 0
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            await op(cid, i)
            latencies.append(time.perf_counter() - t0)
            i += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    elapsed = time.perf_counter() - t0
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return len(latencies) / elapsed, statistics.median(latencies) * 1000, p99 * 1000


def start_gateway(redis_url: str, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "BB_REDIS_URL": redis_url,
        "BB_JWT_SECRET": SECRET,
        "BB_RATE_LIMIT_PER_MINUTE": "0",
        "BB_LOG_LEVEL": "WARNING",
        "BB_DATA_DIR": tempfile.mkdtemp(),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "blackboard_mcp.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("gateway did not start")


async def run(seconds: float, workers: int) -> None:
    with tempfile.TemporaryDirectory() as data, EmbeddedRedis(data_dir=Path(data)) as server:
        client = aioredis.Redis.from_url(server.url, max_connections=64)
        board = Board(client=client)
        await board.start()
        for i in range(200):
            await board.update_state(
                author="b",
                uri=f"bb://{WS}/seed/n{i}",
                digest=f"seed note {i} about topic{i % 10}",
                body="x" * 300,
            )
        proc, url = start_gateway(server.url, workers)
        signing, _ = keys_from_settings(Settings(jwt_secret=SECRET))
        assert signing is not None
        token = TokenIssuer(
            signing_key=signing, issuer="blackboard-mcp", audience="blackboard-mcp"
        ).issue(
            subject="bench",
            workspace=WS,
            read=["*"],
            write=["*"],
            capabilities=["board_read", "board_write"],
            ttl_seconds=3600,
        )
        http = httpx.AsyncClient(
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18",
            },
            limits=httpx.Limits(max_connections=32),
            timeout=30,
        )

        async def via_gateway(tool: str, args: dict[str, object]) -> None:
            body = orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": args},
                }
            )
            response = await http.post(url + "/mcp/", content=body)
            if response.status_code != 200 or response.json()["result"].get("isError"):
                raise RuntimeError(response.text[:300])

        ops: dict[str, dict[str, Callable[[int, int], Awaitable[object]]]] = {
            "update_state": {
                "raw redis SET": lambda c, i: client.set(f"raw:{c}:{i % 50}", "x" * 300),
                "store": lambda c, i: board.update_state(
                    author="b",
                    uri=f"bb://{WS}/w/c{c}-{i % 50}",
                    digest="bench note",
                    body="x" * 300,
                ),
                "gateway": lambda c, i: via_gateway(
                    "update_state",
                    {
                        "uri": f"bb://{WS}/g/c{c}-{i % 50}",
                        "digest": "bench note",
                        "body": "x" * 300,
                    },
                ),
            },
            "get_state": {
                "raw redis GET": lambda c, i: client.get(f"raw:{c}:{i % 50}"),
                "store": lambda c, i: board.get_state(uris=[f"bb://{WS}/seed/n{i % 200}"]),
                "gateway": lambda c, i: via_gateway(
                    "get_state", {"uris": [f"bb://{WS}/seed/n{i % 200}"]}
                ),
            },
            "search_keys": {
                "store": lambda c, i: board.search_keys(workspace=WS, q=f"topic{i % 10}"),
                "gateway": lambda c, i: via_gateway("search_keys", {"q": f"topic{i % 10}"}),
            },
        }
        print(
            f"gateway workers: {workers}; {seconds}s per cell; 2-core machine, load "
            "generator in the same machine"
        )
        print(
            f"{'tool':<13} {'path':<14} {'clients':>7} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8}"
        )
        ratios: list[str] = []
        try:
            for tool, paths in ops.items():
                for clients in (1, 16):
                    rates: dict[str, float] = {}
                    for path, op in paths.items():
                        rate, p50, p99 = await measure(op, clients, seconds)
                        rates[path] = rate
                        print(
                            f"{tool:<13} {path:<14} {clients:>7} {rate:>9.0f} {p50:>8.2f} "
                            f"{p99:>8.2f}"
                        )
                    ratios.append(
                        f"{tool} x{clients}: store/gateway = "
                        f"{rates['store'] / rates['gateway']:.2f}x"
                    )
        finally:
            await http.aclose()
            proc.terminate()
            proc.wait()
            await board.close()
        print("\n".join(ratios))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(run(args.seconds, args.workers))


if __name__ == "__main__":
    main()
