"""Change notifications: latency from a write's acknowledgement to each listener's event,
and the write path's throughput with and without listeners, in one run.

Two gateway processes share one embedded Redis. Listeners hold 2026-07-28
``subscriptions/listen`` streams on both (one listener: on B; a hundred: half on each), all
in one separate process, and timestamp each ``notifications/resources/updated`` as it
arrives. Writes go through A, one at a time, and are timestamped when their answer arrives
(both processes read the same monotonic clock). A notification can come in before its
write's answer, which gives a negative latency: it is counted as it is.

Throughput: writers on kept-alive connections (half to each gateway) write new notes for a
fixed time, first with no listener, then with 100 listeners following the topic.

    python bench/notify_latency.py [--writes 300] [--seconds 5] [--writers 16]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _gateway_process import bench_issuer, bench_token, start_gateway
from _rawhttp import RawHttpConnection, process_tree_cpu_seconds

from blackboard_mcp.store import EmbeddedRedis
from blackboard_mcp.testing import listen_request

WORKSPACE = "bench-notify"
# Only notifications/resources/updated carry a "uri" (the acknowledgement lists its
# subscriptions under "resourceSubscriptions").
_URI = re.compile(rb'"uri":"([^"]+)"')


async def _one_listener(
    port: int, token: str, uris: list[str], ready: asyncio.Event, seen: list[tuple[str, float]]
) -> bool:
    """Record (uri, time) per event until cancelled; False if the server ended the stream."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(listen_request(f"127.0.0.1:{port}", "/mcp/", token, uris, client="bench"))
    buffer = b""
    try:
        while True:
            chunk = await reader.read(65536)
            now = time.perf_counter()
            if not chunk:
                return False
            buffer += chunk
            if not ready.is_set() and b"subscriptions/acknowledged" in buffer:
                ready.set()
            for match in _URI.finditer(buffer):
                seen.append((match.group(1).decode(), now))
            cut = buffer.rfind(b"\n")
            buffer = buffer[cut + 1 :] if cut >= 0 else buffer
            if b'"error"' in chunk:
                return False
    finally:
        writer.close()


def _listeners_main(
    ports: list[int], tokens: list[str], uris: list[str], conn: mp.connection.Connection
) -> None:
    async def run() -> None:
        seen: list[list[tuple[str, float]]] = [[] for _ in tokens]
        readies = [asyncio.Event() for _ in tokens]
        tasks = [
            asyncio.create_task(
                _one_listener(ports[i % len(ports)], tokens[i], uris, readies[i], seen[i])
            )
            for i in range(len(tokens))
        ]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
        conn.send("ready")
        while not conn.poll():
            await asyncio.sleep(0.05)
        conn.recv()
        ended = sum(1 for t in tasks if t.done() and t.result() is False)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        conn.send({"seen": seen, "dropped": ended})

    asyncio.run(run())


class Listeners:
    def __init__(self, ports: list[int], tokens: list[str], uris: list[str]) -> None:
        self._conn, child = mp.Pipe()
        self._proc = mp.Process(target=_listeners_main, args=(ports, tokens, uris, child))
        self._proc.start()
        if self._conn.recv() != "ready":
            raise SystemExit("listeners did not start")

    def stop(self) -> dict[str, object]:
        self._conn.send("stop")
        result: dict[str, object] = self._conn.recv()
        self._proc.join(10)
        return result


def _write_body(uri: str) -> bytes:
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "update_state", "arguments": {"uri": uri, "digest": "d"}},
        }
    )


def _headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }


async def _sequential_writes(
    port: int, token: str, topic: str, n: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Each write's (sent, acknowledged) times, by address."""
    conn = RawHttpConnection("127.0.0.1", port, _headers(token))
    sent: dict[str, float] = {}
    acked: dict[str, float] = {}
    try:
        for i in range(n):
            uri = f"bb://{WORKSPACE}/{topic}/w{i}"
            sent[uri] = time.perf_counter()
            status, body = await conn.post("/mcp/", _write_body(uri))
            acked[uri] = time.perf_counter()
            if status != 200 or b'"isError":true' in body:
                raise SystemExit(f"write failed: {body[:300]!r}")
            await asyncio.sleep(0.01)
    finally:
        await conn.close()
    return sent, acked


async def _throughput(
    ports: list[int], token: str, topic: str, writers: int, seconds: float
) -> float:
    done = 0
    stop_at = time.perf_counter() + seconds

    async def writer(k: int) -> None:
        nonlocal done
        conn = RawHttpConnection("127.0.0.1", ports[k % len(ports)], _headers(token))
        i = 0
        try:
            while time.perf_counter() < stop_at:
                status, body = await conn.post(
                    "/mcp/", _write_body(f"bb://{WORKSPACE}/{topic}/c{k}-{i}")
                )
                if status != 200 or b'"isError":true' in body:
                    raise SystemExit(f"write failed: {body[:300]!r}")
                done += 1
                i += 1
        finally:
            await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(writer(k) for k in range(writers)))
    return done / (time.perf_counter() - started)


def _latencies(acked: dict[str, float], result: dict[str, object]) -> tuple[list[float], int]:
    lat: list[float] = []
    missing = 0
    for seen in result["seen"]:  # type: ignore[attr-defined]
        first: dict[str, float] = {}
        for uri, at in seen:
            first.setdefault(uri, at)
        for uri, at in acked.items():
            if uri in first:
                lat.append((first[uri] - at) * 1000)
            else:
                missing += 1
    return lat, missing


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--writers", type=int, default=16)
    args = parser.parse_args()
    issuer = bench_issuer()

    def token() -> str:
        return bench_token(workspace=WORKSPACE, ttl_seconds=3600, issuer=issuer)

    writer_token = token()
    with tempfile.TemporaryDirectory() as data, EmbeddedRedis(data_dir=Path(data)) as server:
        a, port_a = start_gateway(server.url)
        b, port_b = start_gateway(server.url)
        try:
            ports = [port_a, port_b]
            follow = [f"bb://{WORKSPACE}/lat", f"bb://{WORKSPACE}/load"]
            print(
                f"# {args.writes} sequential writes through A, 10 ms apart; "
                f"{args.writers} writers for {args.seconds:g} s (half to A, half to B)"
            )

            def gateways_cpu() -> float:
                return process_tree_cpu_seconds(a.pid) + process_tree_cpu_seconds(b.pid)

            cpu = gateways_cpu()
            base = asyncio.run(_throughput(ports, writer_token, "load", args.writers, args.seconds))
            cpu = gateways_cpu() - cpu
            print(
                f"throughput, no listener: {base:.0f} writes/s, gateways' CPU "
                f"{1000 * cpu / (base * args.seconds):.2f} ms/write"
            )
            for count in (1, 100):
                tokens = [token() for _ in range(count)]
                listeners = Listeners([port_b] if count == 1 else ports, tokens, follow)
                sent, acked = asyncio.run(
                    _sequential_writes(port_a, writer_token, "lat", args.writes)
                )
                loaded = None
                if count == 100:
                    cpu = gateways_cpu()
                    loaded = asyncio.run(
                        _throughput(ports, writer_token, "load", args.writers, args.seconds)
                    )
                    cpu = gateways_cpu() - cpu
                time.sleep(1.0)
                result = listeners.stop()
                lat, missing = _latencies(acked, result)
                from_sent, _ = _latencies(sent, result)
                print(
                    f"latency, {count} listener(s): events {len(lat)}, missing {missing}, "
                    f"dropped streams {result['dropped']}; from ack p50 "
                    f"{statistics.median(lat):.2f} ms, p99 {_pct(lat, 0.99):.2f} ms; "
                    f"from request sent p50 {statistics.median(from_sent):.2f} ms, "
                    f"p99 {_pct(from_sent, 0.99):.2f} ms"
                )
                if loaded is not None:
                    print(
                        f"throughput, 100 listeners: {loaded:.0f} writes/s "
                        f"({100 * loaded / base:.0f}% of no listener), gateways' CPU "
                        f"{1000 * cpu / (loaded * args.seconds):.2f} ms/write "
                        f"({10 * cpu / (loaded * args.seconds):.3f} ms per notification)"
                    )
        finally:
            for proc in (a, b):
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    main()
