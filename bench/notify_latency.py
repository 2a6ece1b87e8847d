"""Change notifications: the write path's throughput with 0, 100 and 1,000 listeners, and
each notification's latency from its write's acknowledgement, in one run.

Two gateway processes share one embedded Redis. Listeners hold 2026-07-28
``subscriptions/listen`` streams, half on each gateway, each with its own token, spread
over several processes of their own (so that the listening side is not what bounds the
figures) and following the two topics written. A listener counts what it reads in a
protocol callback under uvloop, with no task to wake per read, and the run prints the
listener processes' CPU a write beside the gateways': on one machine both come out of the
same cores. For each listener count:

- throughput: writers on kept-alive connections (half to each gateway) write new notes for
  a fixed time;
- latency: then single writes through A, 10 ms apart, each timestamped when its answer
  arrives; every listener timestamps each notification as it comes (all processes read one
  monotonic clock), so a notification can come before its write's answer: a negative
  latency, counted as it is.

A figure counts only if every listener was still listening at the end and heard of every
write of both phases: the run says "KEPT" or how many streams ended and how many
notifications are missing. With ``--paths direct,sdk`` the whole run is made twice, once on
gateways that write streams on the direct path (the default) and once through the SDK
(``BB_DIRECT_TOOL_CALLS=false``), each against its own no-listener throughput.

``--against REV`` makes the same run with gateways of git revision REV, on the same Redis.

    python bench/notify_latency.py [--listeners 0,100,1000] [--paths direct,sdk]
        [--seconds 5] [--writes 200] [--writers 16] [--listener-procs 4] [--rounds 1]
        [--against REV]

With ``--rounds N`` the whole run is made N times (each revision in turn, in every round),
each round's figures against its own no-listener rate, and the median printed at the end:
on two cores shared by the gateways, Redis, the writers and the listeners, one round's
share swings by ten points or more.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import NamedTuple

import orjson
import uvloop

sys.path.insert(0, str(Path(__file__).parent))
from _harness import (
    Figures,
    bench_issuer,
    bench_token,
    embedded_redis,
    median,
    percentile,
    revisions,
    rounds,
    start_bench_gateway,
)
from _rawhttp import RawHttpConnection, process_tree_cpu_seconds

from blackboard_mcp.testing import listen_request

WORKSPACE = "bench-notify"
_MARK = b'"uri":"'
_LOAD_MARK = b'"uri":"bb://' + WORKSPACE.encode() + b"/load/"


class _Figure(NamedTuple):
    """One listener count's result in one round."""

    listeners: int
    share: float  # of the round's no-listener writes/s
    kept: bool  # every listener kept, every notification heard
    p99_ms: float
    cpu_ratio: float  # the gateways' CPU a write, against the round's no-listener figure


@dataclass
class _Heard:
    load: int = 0  # notifications of the throughput phase (counted, not parsed)
    lat: dict[str, float] | None = None  # first arrival of each latency-phase address
    ended: bool = False


class _ListenerProtocol(asyncio.Protocol):
    """One listen stream, counted as it arrives: a callback a read, with no task to wake,
    so that the listening side costs the machine as little as it can (it shares the cores
    with the gateways it measures)."""

    def __init__(self, ready: asyncio.Event, heard: _Heard) -> None:
        self._ready = ready
        self._heard = heard
        self._tail = b""
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stopping = False

    def data_received(self, chunk: bytes) -> None:
        now = time.perf_counter()
        heard = self._heard
        if not self._ready.is_set() and b"subscriptions/acknowledged" in chunk:
            self._ready.set()
        data = self._tail + chunk if self._tail else chunk
        cut = data.rfind(b"\n")
        whole, self._tail = (data[: cut + 1], data[cut + 1 :]) if cut >= 0 else (b"", data)
        loads = whole.count(_LOAD_MARK)
        heard.load += loads
        if whole.count(_MARK) > loads:
            assert heard.lat is not None
            for line in whole.split(b"\n"):
                at = line.find(_MARK)
                if at >= 0 and not line.startswith(_LOAD_MARK, at):
                    uri = line[at + len(_MARK) : line.index(b'"', at + len(_MARK))]
                    heard.lat.setdefault(uri.decode(), now)
        if b'"error"' in whole or b'"result"' in whole:
            heard.ended = True

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.stopping:
            self._heard.ended = True
        if not self.closed.done():
            self.closed.set_result(None)


async def _one_listener(
    port: int, token: str, uris: list[str], ready: asyncio.Event, heard: _Heard
) -> None:
    heard.lat = {}
    transport, stream = await asyncio.get_running_loop().create_connection(
        lambda: _ListenerProtocol(ready, heard), "127.0.0.1", port
    )
    transport.write(listen_request(f"127.0.0.1:{port}", "/mcp/", token, uris, client="bench"))
    try:
        await stream.closed
    finally:
        stream.stopping = True
        transport.close()


def _listeners_main(
    ports: list[int], tokens: list[str], uris: list[str], conn: Connection, offset: int
) -> None:
    async def run() -> None:
        heard = [_Heard() for _ in tokens]
        readies = [asyncio.Event() for _ in tokens]
        tasks = [
            asyncio.create_task(
                _one_listener(
                    ports[(offset + i) % len(ports)], tokens[i], uris, readies[i], heard[i]
                )
            )
            for i in range(len(tokens))
        ]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 120)
        conn.send("ready")
        while not conn.poll():
            await asyncio.sleep(0.05)
        conn.recv()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        conn.send([(h.load, h.lat, h.ended) for h in heard])

    uvloop.run(run())


class Listeners:
    """``len(tokens)`` listeners over ``procs`` processes, half on each gateway."""

    def __init__(self, ports: list[int], tokens: list[str], uris: list[str], procs: int) -> None:
        self._children: list[tuple[Connection, mp.Process]] = []
        if not tokens:
            return
        procs = max(1, min(procs, len(tokens)))
        share = -(-len(tokens) // procs)
        for k in range(procs):
            part = tokens[k * share : (k + 1) * share]
            if not part:
                continue
            mine, theirs = mp.Pipe()
            proc = mp.Process(target=_listeners_main, args=(ports, part, uris, theirs, k * share))
            proc.start()
            self._children.append((mine, proc))
        for mine, _ in self._children:
            if mine.recv() != "ready":
                raise SystemExit("listeners did not start")

    def cpu_seconds(self) -> float:
        """CPU the listener processes have used so far."""
        return sum(process_tree_cpu_seconds(proc.pid or 0) for _, proc in self._children)

    def stop(self) -> list[tuple[int, dict[str, float], bool]]:
        for mine, _ in self._children:
            mine.send("stop")
        heard: list[tuple[int, dict[str, float], bool]] = []
        for mine, proc in self._children:
            heard.extend(mine.recv())
            proc.join(10)
        return heard


def _write_body(uri: str) -> bytes:
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "update_state",
                "arguments": {"uri": uri, "digest": "d", "body": ""},
            },
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
    port: int, token: str, prefix: str, n: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Each write's (sent, acknowledged) times, by address."""
    conn = RawHttpConnection("127.0.0.1", port, _headers(token))
    sent: dict[str, float] = {}
    acked: dict[str, float] = {}
    try:
        for i in range(n):
            uri = f"bb://{WORKSPACE}/lat/{prefix}-{i}"
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
    ports: list[int], token: str, prefix: str, writers: int, seconds: float
) -> tuple[int, float]:
    """How many writes the writers made, and in how many seconds."""
    done = 0
    stop_at = time.perf_counter() + seconds

    async def writer(k: int) -> None:
        nonlocal done
        conn = RawHttpConnection("127.0.0.1", ports[k % len(ports)], _headers(token))
        i = 0
        try:
            while time.perf_counter() < stop_at:
                status, body = await conn.post(
                    "/mcp/", _write_body(f"bb://{WORKSPACE}/load/{prefix}-{k}-{i}")
                )
                if status != 200 or b'"isError":true' in body:
                    raise SystemExit(f"write failed: {body[:300]!r}")
                done += 1
                i += 1
        finally:
            await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(writer(k) for k in range(writers)))
    return done, time.perf_counter() - started


def _run_path(
    path: str,
    counts: list[int],
    args: argparse.Namespace,
    redis_url: str,
    tree: tuple[str, Path | None],
    round_no: int,
) -> list[_Figure]:
    """One round: each count's (listeners, share of the no-listener rate, all kept, p99)."""
    label, package_root = tree
    issuer = bench_issuer()

    def token() -> str:
        return bench_token(workspace=WORKSPACE, ttl_seconds=3600, issuer=issuer)

    env = {"BB_DIRECT_TOOL_CALLS": "true" if path == "direct" else "false"}
    a = start_bench_gateway(redis_url, extra_env=env, package_root=package_root)
    b = start_bench_gateway(redis_url, extra_env=env, package_root=package_root)
    ports = [a.port, b.port]
    writer_token = token()
    follow = [f"bb://{WORKSPACE}/lat", f"bb://{WORKSPACE}/load"]
    base: float | None = None
    base_cpu: float | None = None
    figures: list[_Figure] = []
    try:
        for count in counts:
            prefix = f"{label}-{path}-{count}-r{round_no}".replace(" ", "-")
            listeners = Listeners(ports, [token() for _ in range(count)], follow, args.procs)
            cpu = process_tree_cpu_seconds(a.pid) + process_tree_cpu_seconds(b.pid)
            heard_cpu = listeners.cpu_seconds()
            done, took = asyncio.run(
                _throughput(ports, writer_token, prefix, args.writers, args.seconds)
            )
            cpu = process_tree_cpu_seconds(a.pid) + process_tree_cpu_seconds(b.pid) - cpu
            heard_cpu = listeners.cpu_seconds() - heard_cpu
            rate = done / took
            base = rate if base is None else base
            base_cpu = cpu / done if base_cpu is None else base_cpu
            _sent, acked = asyncio.run(
                _sequential_writes(a.port, writer_token, prefix, args.writes)
            )
            time.sleep(1.0)  # the last notifications on their way
            heard = listeners.stop()
            line = (
                f"{label:<14} {path:6} {count:5} listeners: {rate:6.0f} writes/s "
                f"({100 * rate / base:3.0f}% of none), gateways' CPU "
                f"{1000 * cpu / done:.2f} ms/write"
            )
            if count:
                lat = [
                    (lat_seen[uri] - at) * 1000
                    for _, lat_seen, _ in heard
                    for uri, at in acked.items()
                    if uri in lat_seen
                ]
                missing = sum(done - load for load, _, _ in heard) + (count * len(acked) - len(lat))
                ended = sum(1 for _, _, was_ended in heard if was_ended)
                kept = "KEPT" if not missing and not ended else f"ended {ended}, missing {missing}"
                figures.append(
                    _Figure(
                        count,
                        rate / base,
                        kept == "KEPT",
                        percentile(lat, 0.99),
                        cpu / done / base_cpu,
                    )
                )
                line += (
                    f", listeners' CPU {1000 * heard_cpu / done:.2f} ms/write"
                    f", {count * (done + len(acked))} notifications, {kept}; from ack p50 "
                    f"{median(lat):.2f} ms, p99 {percentile(lat, 0.99):.2f} ms"
                )
            print(line, flush=True)
    finally:
        a.stop()
        b.stop()
    return figures


def _summary(label: str, path: str, by_count: Figures[int, _Figure]) -> None:
    """Each count's medians over the rounds, and whether every round kept everyone."""
    for count in by_count.cells():
        seen = by_count[count]
        shares = [f.share for f in seen]
        print(
            f"{label:<14} {path:6} {count:5} listeners over {len(seen)} rounds: median "
            f"{100 * median(shares):3.0f}% of none (from {100 * min(shares):.0f}% "
            f"to {100 * max(shares):.0f}%), gateways' CPU a write "
            f"{by_count.median(count, lambda f: f.cpu_ratio):.2f}x none, p99 at most "
            f"{max(f.p99_ms for f in seen):.0f} ms, "
            + ("every listener kept in every round" if all(f.kept for f in seen) else "NOT KEPT"),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listeners", default="0,100,1000")
    parser.add_argument("--paths", default="direct")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--listener-procs", dest="procs", type=int, default=4)
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat the whole run, and report the median"
    )
    parser.add_argument(
        "--against", action="append", default=[], help="also the gateway of this git revision"
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.listeners.split(",")]
    if counts[0] != 0:
        counts.insert(0, 0)  # every ratio is against no listener, in the same run
    print(
        f"# {args.writers} writers for {args.seconds:g} s (half to each gateway), then "
        f"{args.writes} single writes through A 10 ms apart; listeners over {args.procs} "
        "processes, half on each gateway"
    )
    with embedded_redis() as server, revisions(args.against) as trees:
        runs: dict[tuple[str, str], Figures[int, _Figure]] = {}
        for round_no, order in rounds(args.rounds, trees):
            for path in args.paths.split(","):
                for tree in order:
                    figures = _run_path(path, counts, args, server.url, tree, round_no - 1)
                    by_count = runs.setdefault((tree[0], path), Figures())
                    for figure in figures:
                        by_count.add(figure.listeners, figure)
        if args.rounds > 1:
            for (label, path), by_count in runs.items():
                _summary(label, path, by_count)


if __name__ == "__main__":
    main()
