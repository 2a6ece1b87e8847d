"""What the gateway costs on top of the store: update_state, get_state and search_keys as raw
redis-py, the store called directly, and through the gateway (MCP over HTTP) in both
protocol eras, with 1 and 16 concurrent clients, in one run on one embedded Redis.

    python bench/gateway_vs_store.py [--seconds 3] [--workers 1,2] [--clients 1,16] [--repeat 3]
                                     [--no-sdk-path]

For each cell it prints calls/s, p50/p99 latency and the CPU spent per call by the process
doing the work (the bench process for raw and store, the gateway's processes for the
gateway), then the store/gateway ratios. "sdk floor" is the MCP SDK alone with the same
transport settings and a tool that does nothing (bench/_sdk_floor_server.py): what any
gateway built on the SDK pays per call before doing anything. "via SDK" is the gateway with
``BB_DIRECT_TOOL_CALLS=false``: every call through the SDK's own request handling rather
than the gateway's direct path for plain tool calls (gateway/_direct.py).
Gateway clients send raw JSON-RPC ``tools/call``
POSTs on kept-alive connections (the gateway is stateless, so no handshake is needed):
``2025-06-18`` is a handshake-era client such as the TypeScript SDK, ``2026-07-28`` a
single-exchange one such as the Python SDK's default.

The load generator runs on the same two cores as the gateway and Redis. Calls/s therefore
understate what the gateway does on a machine of its own; CPU per call does not depend on
who else is running, and is the figure to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
import redis.asyncio as aioredis
from _harness import (
    Figures,
    bench_token,
    concurrently,
    embedded_redis,
    rounds,
    script_server,
    start_bench_gateway,
)
from _rawhttp import RawHttpConnection, process_tree_cpu_seconds

from blackboard_mcp.store import Board, GetState, SearchKeys, UpdateState

WS = "bench"
BODY = "x" * 300
ERAS = ("2025-06-18", "2026-07-28")

Op = Callable[[int, int], Awaitable[object]]


@dataclass
class Cell:
    rate: float
    p50_ms: float
    p99_ms: float
    cpu_ms_per_call: float


async def measure(op: Op, clients: int, seconds: float, cpu: Callable[[], float]) -> Cell:
    cpu0 = cpu()
    timed = await concurrently(op, clients, seconds)
    spent = cpu() - cpu0
    return Cell(timed.rate, timed.p50_ms, timed.ms(0.99), spent / timed.calls * 1000)


class GatewayClients:
    """One kept-alive connection per simulated client, speaking one protocol era."""

    def __init__(self, port: int, token: str, era: str) -> None:
        self._era = era
        self._connections: dict[int, RawHttpConnection] = {}
        self._port = port
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": era,
        }

    async def call(self, cid: int, tool: str, arguments: dict[str, object]) -> None:
        connection = self._connections.get(cid)
        if connection is None:
            connection = RawHttpConnection("127.0.0.1", self._port, self._headers)
            self._connections[cid] = connection
        params: dict[str, object] = {"name": tool, "arguments": arguments}
        extra = ""
        if self._era == "2026-07-28":
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": self._era,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            extra = f"Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\n"
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        status, reply = await connection.post("/mcp/", body, extra)
        if status != 200 or orjson.loads(reply)["result"].get("isError"):
            raise RuntimeError(reply[:300].decode(errors="replace"))

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()


def gateway_ops(gw: GatewayClients, tag: str) -> dict[str, Op]:
    return {
        "update_state": lambda c, i: gw.call(
            c,
            "update_state",
            {"uri": f"bb://{WS}/{tag}/c{c}-{i % 50}", "digest": "bench note", "body": BODY},
        ),
        "get_state": lambda c, i: gw.call(
            c, "get_state", {"uris": [f"bb://{WS}/seed/n{(c * 7 + i) % 200}"]}
        ),
        "search_keys": lambda c, i: gw.call(c, "search_keys", {"q": f"topic{i % 10}"}),
    }


async def run(
    seconds: float,
    worker_counts: list[int],
    client_counts: list[int],
    repeat: int,
    sdk_path: bool,
) -> None:
    with embedded_redis() as server, contextlib.ExitStack() as running:
        client = aioredis.Redis.from_url(server.url, max_connections=64)
        # The store as the gateway builds it (same pool, timeouts and retry), called directly.
        board = Board.from_url(server.url)
        await board.start()
        for i in range(200):
            await board.update_state(
                UpdateState.parse(
                    {
                        "uri": f"bb://{WS}/seed/n{i}",
                        "digest": f"seed note {i} about topic{i % 10}",
                        "body": BODY,
                    }
                ),
                author="b",
            )
        token = bench_token(workspace=WS)
        paths: dict[str, dict[str, tuple[Op, Callable[[], float]]]] = {
            "update_state": {
                "raw redis SET": (
                    lambda c, i: client.set(f"raw:{c}:{i % 50}", BODY),
                    time.process_time,
                ),
                "store": (
                    lambda c, i: board.update_state(
                        UpdateState.parse(
                            {"uri": f"bb://{WS}/w/c{c}-{i % 50}", "digest": "bench", "body": BODY}
                        ),
                        author="b",
                    ),
                    time.process_time,
                ),
            },
            "get_state": {
                "raw redis GET": (
                    lambda c, i: client.get(f"raw:{c}:{i % 50}"),
                    time.process_time,
                ),
                "store": (
                    lambda c, i: board.get_state(
                        GetState.parse({"uris": [f"bb://{WS}/seed/n{(c * 7 + i) % 200}"]})
                    ),
                    time.process_time,
                ),
            },
            "search_keys": {
                "store": (
                    lambda c, i: board.search_keys(
                        SearchKeys.parse({"q": f"topic{i % 10}"}), workspace=WS
                    ),
                    time.process_time,
                ),
            },
        }
        gateways: list[GatewayClients] = []
        try:
            floor, floor_port = running.enter_context(
                script_server("_sdk_floor_server.py", name="the SDK floor server")
            )
            for era in ERAS:
                gw = GatewayClients(floor_port, token, era)
                gateways.append(gw)
                pid = floor.pid
                for tool, op in gateway_ops(gw, "floor").items():
                    if tool != "search_keys":
                        paths[tool][f"sdk floor {era}"] = (
                            op,
                            functools.partial(process_tree_cpu_seconds, pid),
                        )
            # The gateway as deployed, and once with BB_DIRECT_TOOL_CALLS=false: every call
            # through the SDK's own request handling, to show what the direct path saves.
            setups = [(w, f"w{w}", {}) for w in worker_counts]
            if sdk_path:
                setups.append((1, "via SDK w1", {"BB_DIRECT_TOOL_CALLS": "false"}))
            for workers, label, extra_env in setups:
                gateway = running.enter_context(
                    start_bench_gateway(server.url, workers=workers, extra_env=extra_env)
                )
                for era in ERAS:
                    gw = GatewayClients(gateway.port, token, era)
                    gateways.append(gw)
                    name = f"gw {era} {label}"
                    pid = gateway.pid
                    tag = f"g{label.replace(' ', '').lower()}{era[:4]}"
                    for tool, op in gateway_ops(gw, tag).items():
                        paths[tool][name] = (op, functools.partial(process_tree_cpu_seconds, pid))
            print(
                f"{seconds}s per cell, median of {repeat} interleaved rounds; 2-core machine; "
                "load generator, gateway and Redis share it"
            )
            print(
                f"{'tool':<13} {'path':<26} {'clients':>7} {'calls/s':>8} {'p50 ms':>7} "
                f"{'p99 ms':>7} {'cpu ms/call':>11}"
            )
            ratios: list[str] = []
            for tool, by_path in paths.items():
                for clients in client_counts:
                    # Rounds interleave the paths, so a slow spell of the machine falls on all
                    # of them alike; each path's round of median calls/s is the one shown.
                    measured: Figures[str, Cell] = Figures()
                    for _, order in rounds(repeat, list(by_path.items())):
                        for path, (op, cpu) in order:
                            await measure(op, clients, min(0.5, seconds), cpu)  # warm up
                            measured.add(path, await measure(op, clients, seconds, cpu))
                            # uvicorn drops connections idle for 5 s: start each afresh.
                            for gw in gateways:
                                await gw.close()
                    cells = {path: measured.middle(path, lambda c: c.rate) for path in by_path}
                    for path, cell in cells.items():
                        print(
                            f"{tool:<13} {path:<26} {clients:>7} {cell.rate:>8.0f} "
                            f"{cell.p50_ms:>7.2f} {cell.p99_ms:>7.2f} "
                            f"{cell.cpu_ms_per_call:>11.3f}"
                        )
                    store = cells["store"]
                    for path, cell in cells.items():
                        if not path.startswith(("raw", "store")):
                            ratios.append(
                                f"{tool:<13} x{clients:<3} {path:<26} store/gateway calls/s "
                                f"{store.rate / cell.rate:5.2f}x   gateway/store cpu per call "
                                f"{cell.cpu_ms_per_call / store.cpu_ms_per_call:5.2f}x"
                            )
            print()
            print("\n".join(ratios))
        finally:
            for gw in gateways:
                await gw.close()
            await board.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--workers", default="1", help="comma-separated worker counts")
    parser.add_argument("--clients", default="1,16", help="comma-separated client counts")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds per cell")
    parser.add_argument(
        "--no-sdk-path",
        action="store_true",
        help="leave out the gateway with BB_DIRECT_TOOL_CALLS=false",
    )
    args = parser.parse_args()
    asyncio.run(
        run(
            args.seconds,
            [int(w) for w in args.workers.split(",")],
            [int(c) for c in args.clients.split(",")],
            args.repeat,
            not args.no_sdk_path,
        )
    )


if __name__ == "__main__":
    main()
