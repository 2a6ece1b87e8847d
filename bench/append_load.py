"""Appends and hot notes through the gateway, side by side with another revision's gateway.

    python bench/append_load.py [--appends 150] [--seconds 5] [--rounds 2] [--against REV]...

What agents send: raw JSON-RPC ``tools/call`` POSTs on kept-alive connections (bench/_rawhttp.py,
so the load generator costs little of the two cores), one gateway process (one uvicorn
worker) per revision on one embedded Redis, every revision's gateway measured in the same
round, one after another, rounds interleaved.

1. **Append cost by size.** A note is written whole at 10 KiB, 100 KiB and 1 MiB (less room
   for the appends), then one client appends a numbered 61-byte line ``--appends`` times:
   ms per append, and the 1 MiB figure over the 10 KiB one (target: within 1.5x).
2. **A hot note.** 64 clients append to one note for ``--seconds``, against 8 clients each
   appending to a note of its own: appends/s, refusals, and hot over spread (target: >= 0.8,
   0 refused).
3. **Hot compare-and-swap.** 64 clients each read a note's version (``get_state`` ref) and
   write it with that ``expect_version``, retrying a conflict at once on the version the
   refusal names: commits/s, conflicts per commit, and the p99 latency of a commit (from its
   first read). Only one writer per version can win and every other writer's try for it is
   a refused call, so commits/s is about the gateway's calls/s over the number of writers.

Exits 1 if an acknowledged append is missing from a note, or an error other than the
documented refusals comes back.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import orjson
from _harness import (
    Figures,
    bench_token,
    embedded_redis,
    mcp_headers,
    percentile,
    revisions,
    rounds,
    scratch,
    start_bench_gateway,
)
from _rawhttp import RawHttpConnection

from blackboard_mcp.testing import GatewayProcess

WORKSPACE = "appends"
LINE = "step {n:06d}: checked replica lag on the standby, WAL position noted. ok\n"[:60] + "\n"
SIZES = {"10 KiB": 10 * 1024, "100 KiB": 100 * 1024, "1 MiB": 1024 * 1024 - 64 * 1024}
HOT_WRITERS, SPREAD_WRITERS = 64, 8


@dataclass
class Gateway:
    label: str
    slug: str  # for addresses
    port: int
    token: str
    ids: int = 0
    connections: list[RawHttpConnection] = field(default_factory=list)

    def connection(self) -> RawHttpConnection:
        conn = RawHttpConnection("127.0.0.1", self.port, mcp_headers(self.token))
        self.connections.append(conn)
        return conn

    async def call(
        self, conn: RawHttpConnection, tool: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        self.ids += 1
        body = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": self.ids,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        )
        status, raw = await conn.post("/mcp/", body)
        if status != 200:
            raise SystemExit(f"{self.label}: HTTP {status}: {raw[:300]!r}")
        result: dict[str, Any] = orjson.loads(raw)["result"]
        return result

    async def close(self) -> None:
        for conn in self.connections:
            await conn.close()
        self.connections.clear()


def _error(result: dict[str, Any]) -> str | None:
    if not result.get("isError"):
        return None
    return str(result["structuredContent"]["error"]["code"])


async def _cost_by_size(gw: Gateway, round_no: int, appends: int) -> dict[str, float]:
    conn = gw.connection()
    out = {}
    for label, size in SIZES.items():
        uri = f"bb://{WORKSPACE}/size/r{round_no}-{label.replace(' ', '')}-{gw.slug}"
        filler = ("filler line of an existing log, to be appended to. " * 40 + "\n")[:size]
        body = (filler * (size // len(filler) + 1))[:size]
        written = await gw.call(
            conn, "update_state", {"uri": uri, "digest": "A log.", "body": body}
        )
        if _error(written):
            raise SystemExit(f"{gw.label}: could not write the {label} note: {written}")
        started = time.perf_counter()
        for n in range(appends):
            result = await gw.call(
                conn, "update_state", {"uri": uri, "digest": "A log.", "append": LINE.format(n=n)}
            )
            if _error(result):
                raise SystemExit(f"{gw.label}: append refused at {label}: {result}")
        out[label] = (time.perf_counter() - started) * 1000 / appends
    await gw.close()
    return out


async def _append_for(
    gw: Gateway, uris: Sequence[str], seconds: float
) -> tuple[int, int, dict[str, list[str]]]:
    """Each uri's writer appends for ``seconds``: (appends, refusals, lines acknowledged)."""
    acked: dict[str, list[str]] = {uri: [] for uri in uris}
    refused = 0
    end = time.monotonic() + seconds

    async def writer(i: int, uri: str) -> None:
        nonlocal refused
        conn = gw.connection()
        n = 0
        while time.monotonic() < end:
            line = f"<w{i}.{n}>"
            result = await gw.call(
                conn, "update_state", {"uri": uri, "digest": "A shared log.", "append": line}
            )
            code = _error(result)
            if code is None:
                acked[uri].append(line)
            elif code == "conflict":
                refused += 1
            else:
                raise SystemExit(f"{gw.label}: append answered {result}")
            n += 1

    await asyncio.gather(*(writer(i, uri) for i, uri in enumerate(uris)))
    await gw.close()
    return sum(len(lines) for lines in acked.values()), refused, acked


async def _check_kept(gw: Gateway, acked: dict[str, list[str]]) -> None:
    conn = gw.connection()
    for uri, lines in acked.items():
        read = await gw.call(
            conn, "get_state", {"uris": [uri], "mode": "full", "budget_tokens": 100_000}
        )
        item = read["structuredContent"]["items"][0]
        text = item.get("body", "")
        if "cut" in item:
            continue  # larger than a read: counted, not checked
        missing = [line for line in lines if line not in text]
        if missing:
            raise SystemExit(f"{gw.label}: {len(missing)} acknowledged appends lost in {uri}")
    await gw.close()


async def _hot_cas(gw: Gateway, uri: str, seconds: float) -> tuple[int, int, float]:
    """64 CAS writers on one note: (commits, conflicts, p99 ms of a commit from first read)."""
    conn = gw.connection()
    await gw.call(conn, "update_state", {"uri": uri, "digest": "A counter.", "body": "0"})
    await gw.close()
    commits, conflicts = 0, 0
    latencies: list[float] = []
    end = time.monotonic() + seconds

    async def writer() -> None:
        nonlocal commits, conflicts
        conn = gw.connection()
        while time.monotonic() < end:
            started = time.perf_counter()
            read = await gw.call(conn, "get_state", {"uris": [uri], "mode": "ref"})
            version = read["structuredContent"]["items"][0]["version"]
            while True:
                result = await gw.call(
                    conn,
                    "update_state",
                    {
                        "uri": uri,
                        "digest": f"A counter at {version + 1}.",
                        "body": str(version + 1),
                        "expect_version": version,
                    },
                )
                code = _error(result)
                if code is None:
                    commits += 1
                    latencies.append((time.perf_counter() - started) * 1000)
                    break
                if code != "conflict":
                    raise SystemExit(f"{gw.label}: CAS answered {result}")
                conflicts += 1
                # What an agent does: the refusal names the current version; try on it.
                version = result["structuredContent"]["error"]["current_version"]
                if time.monotonic() >= end:
                    return

    await asyncio.gather(*(writer() for _ in range(HOT_WRITERS)))
    await gw.close()
    return commits, conflicts, percentile(latencies, 0.99)


async def run(args: argparse.Namespace, gateways: list[Gateway]) -> None:
    costs: Figures[str, dict[str, float]] = Figures()
    hot: Figures[str, tuple[float, int, float, int]] = Figures()
    cas: Figures[str, tuple[float, float, float]] = Figures()
    for r, order in rounds(args.rounds, gateways):
        for gw in order:
            costs.add(gw.label, await _cost_by_size(gw, r, args.appends))
        for gw in order:
            one = [f"bb://{WORKSPACE}/hot/r{r}-{gw.slug}"] * HOT_WRITERS
            done, refused, acked = await _append_for(gw, one, args.seconds)
            await _check_kept(gw, {one[0]: acked[one[0]]})
            own = [f"bb://{WORKSPACE}/own/r{r}-{gw.slug}-{i}" for i in range(SPREAD_WRITERS)]
            spread_done, spread_refused, spread_acked = await _append_for(gw, own, args.seconds)
            await _check_kept(gw, spread_acked)
            hot.add(
                gw.label, (done / args.seconds, refused, spread_done / args.seconds, spread_refused)
            )
        for gw in order:
            commits, conflicts, p99 = await _hot_cas(
                gw, f"bb://{WORKSPACE}/cas/r{r}-{gw.slug}", args.seconds
            )
            cas.add(gw.label, (commits / args.seconds, conflicts / max(commits, 1), p99))

    print(f"\n1. ms per append of a {len(LINE)}-byte line, by note size (median of rounds)")
    print(f"{'gateway':<24}" + "".join(f"{s:>10}" for s in SIZES) + f"{'1MiB/10KiB':>12}")
    for gw in gateways:
        row = [costs.median(gw.label, itemgetter(s)) for s in SIZES]
        print(f"{gw.label:<24}" + "".join(f"{v:>10.2f}" for v in row) + f"{row[2] / row[0]:>12.2f}")
    print(f"\n2. appends/s: {HOT_WRITERS} writers on one note vs {SPREAD_WRITERS} on their own")
    print(f"{'gateway':<24}{'hot/s':>9}{'refused':>9}{'own/s':>9}{'refused':>9}{'hot/own':>9}")
    for gw in gateways:
        h, hr = hot.median(gw.label, lambda x: x[0]), sum(x[1] for x in hot[gw.label])
        s, sr = hot.median(gw.label, lambda x: x[2]), sum(x[3] for x in hot[gw.label])
        print(f"{gw.label:<24}{h:>9.0f}{hr:>9}{s:>9.0f}{sr:>9}{h / s:>9.2f}")
    print(f"\n3. {HOT_WRITERS} compare-and-swap writers on one note")
    print(f"{'gateway':<24}{'commits/s':>11}{'conflicts/commit':>18}{'p99 ms':>9}")
    for gw in gateways:
        rate, per_commit, p99_ms = (cas.median(gw.label, itemgetter(i)) for i in range(3))
        print(f"{gw.label:<24}{rate:>11.0f}{per_commit:>18.1f}{p99_ms:>9.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=150)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    args = parser.parse_args()
    token = bench_token(workspace=WORKSPACE)
    with (
        scratch("bench-appends-") as work,
        revisions(args.against) as trees,
        embedded_redis(work / "redis") as redis,
    ):
        processes: list[GatewayProcess] = []
        try:
            gateways = []
            for n, (label, tree) in enumerate(trees):
                process = start_bench_gateway(redis.url, work / f"gw-{n}", package_root=tree)
                processes.append(process)
                gateways.append(Gateway(label, f"g{n}", process.port, token))
            asyncio.run(run(args, gateways))
        finally:
            for process in processes:
                process.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
