"""Faults under load: the embedded Redis SIGKILLed and restarted under a running gateway, and
one of two gateways SIGKILLed while clients are spread over both.

Concurrent clients create distinct notes (update_state, expect_version=0) and read them back
(get_state) through raw JSON-RPC tools/call POSTs. Reported: how fast calls fail while Redis is
down (p50/p99 of the `unavailable` answers), the time from Redis answering again to the
gateway's first successful call (the gateway is never restarted), and acknowledged creates that
are not on the board at the end. A second gateway on the same Redis takes no load: a burst of
calls before each kill, a few once Redis is back, to show whether a gateway that was idle
through the outage recovers too. Redis runs once with appendfsync=always (must lose nothing)
and once with everysec (a process kill leaves the page cache, so usually nothing either; an OS
crash could lose up to a second). Exits non-zero on a lost write under `always`, a hang, an
answer other than ok/unavailable, a gateway that fails calls with Redis back, or a failing
survivor.

    python bench/faults.py [--clients 8] [--kills 3] [--outage 2] [--between 4]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _harness import (
    MCP_HEADERS,
    bench_token,
    embedded_redis,
    median,
    percentile,
    scratch,
    start_bench_gateway,
)

from blackboard_mcp.testing import GatewayProcess

WS = "faults"
PROBE_CALLS = 8
HEADERS = MCP_HEADERS


@dataclass(frozen=True)
class Call:
    """One tool call as the client saw it; outcome is ok, a tool error code, or a transport
    failure (`transport`: connection refused or reset, `timeout`: no answer in time)."""

    tool: str
    gateway: int
    started: float
    finished: float
    outcome: str

    @property
    def latency(self) -> float:
        return self.finished - self.started


@dataclass
class Load:
    """Clients that create distinct notes and read them back until told to stop.

    A client whose gateway stops answering at the transport level moves to the next one, as
    it would behind a load balancer. A create is never retried under the same address, so an
    unanswered create that did commit cannot turn into a conflict later.
    """

    urls: list[str]
    token: str
    clients: int
    run: str
    call_timeout: float
    backoff: float
    calls: list[Call] = field(default_factory=list)
    acked: dict[str, str] = field(default_factory=dict)
    stale_reads: int = 0
    failovers: int = 0
    stopping: bool = False

    async def drive(self) -> None:
        async with httpx.AsyncClient(
            headers={**HEADERS, "Authorization": f"Bearer {self.token}"},
            limits=httpx.Limits(max_connections=self.clients * 2),
            timeout=self.call_timeout,
        ) as http:
            await asyncio.gather(*(self._client(http, c) for c in range(self.clients)))

    async def _client(self, http: httpx.AsyncClient, cid: int) -> None:
        gateway = cid % len(self.urls)
        mine: list[str] = []
        i = 0
        while not self.stopping:
            uri = f"bb://{WS}/{self.run}/c{cid}-{i}"
            digest = f"fault note {cid}-{i}"
            args = {"uri": uri, "digest": digest, "body": f"x{i}", "expect_version": 0}
            outcome, body = await self._call(http, gateway, "update_state", args)
            if outcome == "ok":
                if body.get("version") != 1:
                    raise SystemExit(f"create of {uri} answered {body}")
                self.acked[uri] = digest
                mine.append(uri)
            elif outcome == "transport":
                gateway = (gateway + 1) % len(self.urls)
                self.failovers += 1
            if outcome != "ok":
                await asyncio.sleep(self.backoff)
            i += 1
            if not mine or self.stopping:
                continue
            read = mine[-1 - (i % min(len(mine), 20))]
            outcome, body = await self._call(http, gateway, "get_state", {"uris": [read]})
            if outcome == "ok" and body["items"][0].get("version") != 1:
                self.stale_reads += 1
            if outcome != "ok":
                await asyncio.sleep(self.backoff)

    async def _call(
        self, http: httpx.AsyncClient, gateway: int, tool: str, args: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        started = time.perf_counter()
        outcome, body = await tools_call(http, self.urls[gateway], tool, args)
        self.calls.append(Call(tool, gateway, started, time.perf_counter(), outcome))
        return outcome, body


async def tools_call(
    http: httpx.AsyncClient, url: str, tool: str, args: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """One raw JSON-RPC tools/call; returns (outcome, structured content)."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args},
    }
    try:
        response = await http.post(url, content=orjson.dumps(request))
    except httpx.TimeoutException:
        return "timeout", {}
    except httpx.TransportError:
        return "transport", {}
    if response.status_code != 200:
        return f"http-{response.status_code}", {}
    result = response.json()["result"]
    body: dict[str, Any] = result.get("structuredContent") or {}
    return (body["error"]["code"] if result.get("isError") else "ok"), body


def start_gateways(redis_url: str, workdir: Path, count: int) -> list[GatewayProcess]:
    # A gateway spends most of its start importing the MCP SDK: start them side by side.
    with ThreadPoolExecutor(count) as pool:
        starting = [
            pool.submit(start_bench_gateway, redis_url, workdir / f"gw-{n}") for n in range(count)
        ]
    started = [f.result() for f in starting if f.exception() is None]
    if len(started) < count:
        for gateway in started:
            gateway.stop()
        raise next(e for f in starting if (e := f.exception()) is not None)
    return started


def issue_token() -> str:
    return bench_token(workspace=WS, subject="faults", ttl_seconds=3600)


async def lost_writes(url: str, token: str, acked: dict[str, str]) -> list[str]:
    """Acknowledged creates that are missing, or not at version 1 with their digest."""
    lost: list[str] = []
    uris = sorted(acked)
    async with httpx.AsyncClient(
        headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=30
    ) as http:
        for start in range(0, len(uris), 100):
            batch = uris[start : start + 100]
            args = {"uris": batch, "budget_tokens": 100_000}
            for _ in range(20):
                # A gateway may answer `unavailable` once Redis is back (the idle-gateway
                # column): retry, so this count is about durability only.
                outcome, body = await tools_call(http, url, "get_state", args)
                if outcome != "unavailable":
                    break
                await asyncio.sleep(0.05)
            if outcome != "ok":
                raise SystemExit(f"verification read failed: {outcome} {body}")
            items = {i["uri"]: i for i in body["items"]}
            for uri in batch:
                item = items.get(uri, {})
                if item.get("version") != 1 or item.get("digest") != acked[uri]:
                    lost.append(uri)
    return lost


@dataclass
class KillRow:
    mode: str
    kills: int
    calls: int
    ok: int
    unavailable: int
    unavail_p50_ms: float
    unavail_p99_ms: float
    unavail_max_ms: float
    other: Counter[str]
    restart_ms: float
    recovery_ms: list[float]
    idle_failed: list[int]
    acked: int
    lost: int
    stale_reads: int


async def idle_probe(
    http: httpx.AsyncClient, url: str, name: str, acked: dict[str, str], *, concurrent: bool
) -> list[str]:
    """PROBE_CALLS creates on the idle gateway, side by side (to fill its connection pool) or
    one after the other; acknowledged ones join ``acked``."""

    async def create(i: int) -> str:
        uri = f"bb://{WS}/{name}-{i}"
        args = {"uri": uri, "digest": uri, "body": "x", "expect_version": 0}
        outcome, _ = await tools_call(http, url, "update_state", args)
        if outcome == "ok":
            acked[uri] = uri
        return outcome

    if concurrent:
        return list(await asyncio.gather(*(create(i) for i in range(PROBE_CALLS))))
    return [await create(i) for i in range(PROBE_CALLS)]


async def redis_kills(
    mode: Literal["always", "everysec"], args: argparse.Namespace, token: str
) -> KillRow:
    with (
        scratch("bench-faults-") as work,
        embedded_redis(work / "redis", appendfsync=mode) as redis,
    ):
        # The second gateway takes no load: it gets a burst before each kill and a few calls
        # once Redis is back, to show whether a gateway idle through the outage recovers.
        gateway, idle = await asyncio.to_thread(start_gateways, redis.url, work, 2)
        load = Load(
            urls=[gateway.mcp_url],
            token=token,
            clients=args.clients,
            run=f"kill-{mode}",
            call_timeout=args.call_timeout,
            backoff=args.backoff,
        )
        windows: list[tuple[float, float, float]] = []
        idle_failed: list[int] = []
        try:
            async with httpx.AsyncClient(
                headers={**HEADERS, "Authorization": f"Bearer {token}"},
                timeout=args.call_timeout,
            ) as http:
                driver = asyncio.create_task(load.drive())
                await asyncio.sleep(args.warmup)
                for k in range(args.kills):
                    name = f"idle-{mode}/k{k}"
                    await idle_probe(
                        http, idle.mcp_url, f"{name}-warm", load.acked, concurrent=True
                    )
                    killed = time.perf_counter()
                    await asyncio.to_thread(redis.kill)
                    await asyncio.sleep(args.outage)
                    restarting = time.perf_counter()
                    await asyncio.to_thread(redis.start)
                    windows.append((killed, restarting, time.perf_counter()))
                    after = await idle_probe(
                        http, idle.mcp_url, f"{name}-after", load.acked, concurrent=False
                    )
                    idle_failed.append(sum(outcome != "ok" for outcome in after))
                    await asyncio.sleep(args.between)
                load.stopping = True
                await driver
            lost = await lost_writes(gateway.mcp_url, token, load.acked)
        finally:
            gateway.stop()
            idle.stop()
    recovery: list[float] = []
    for killed, _, ready in windows:
        first_ok = min(
            (c.finished for c in load.calls if c.outcome == "ok" and c.started >= killed),
            default=float("inf"),
        )
        recovery.append((first_ok - ready) * 1000)
    unavailable = [c.latency * 1000 for c in load.calls if c.outcome == "unavailable"]
    return KillRow(
        mode=mode,
        kills=args.kills,
        calls=len(load.calls),
        ok=sum(c.outcome == "ok" for c in load.calls),
        unavailable=len(unavailable),
        unavail_p50_ms=median(unavailable) if unavailable else float("nan"),
        unavail_p99_ms=percentile(unavailable, 0.99),
        unavail_max_ms=max(unavailable, default=float("nan")),
        other=Counter(c.outcome for c in load.calls if c.outcome not in ("ok", "unavailable")),
        restart_ms=max((ready - start) * 1000 for _, start, ready in windows),
        recovery_ms=recovery,
        idle_failed=idle_failed,
        acked=len(load.acked),
        lost=len(lost),
        stale_reads=load.stale_reads,
    )


@dataclass
class GatewayKillRow:
    clients: int
    acked_before: int
    acked_after: int
    survivor_calls: int
    survivor_ok: int
    survivor_p99_ms: float
    survivor_errors: Counter[str]
    dead_errors: int
    failovers: int
    lost: int
    stale_reads: int


async def gateway_kill(args: argparse.Namespace, token: str) -> GatewayKillRow:
    with (
        scratch("bench-faults-") as work,
        embedded_redis(work / "redis", appendfsync="always") as redis,
    ):
        victim, survivor = await asyncio.to_thread(start_gateways, redis.url, work, 2)
        load = Load(
            urls=[victim.mcp_url, survivor.mcp_url],
            token=token,
            clients=args.clients,
            run="gateway-kill",
            call_timeout=args.call_timeout,
            backoff=args.backoff,
        )
        try:
            driver = asyncio.create_task(load.drive())
            await asyncio.sleep(args.warmup)
            acked_before = len(load.acked)
            killed = time.perf_counter()
            victim.kill()
            await asyncio.sleep(args.between + args.outage)
            load.stopping = True
            await driver
            lost = await lost_writes(survivor.mcp_url, token, load.acked)
        finally:
            victim.stop()
            survivor.stop()
    after = [c for c in load.calls if c.gateway == 1 and c.started >= killed]
    return GatewayKillRow(
        clients=args.clients,
        acked_before=acked_before,
        acked_after=len(load.acked) - acked_before,
        survivor_calls=len(after),
        survivor_ok=sum(c.outcome == "ok" for c in after),
        survivor_p99_ms=percentile([c.latency * 1000 for c in after], 0.99),
        survivor_errors=Counter(c.outcome for c in after if c.outcome != "ok"),
        dead_errors=sum(c.gateway == 0 and c.outcome != "ok" for c in load.calls),
        failovers=load.failovers,
        lost=len(lost),
        stale_reads=load.stale_reads,
    )


def print_kill_table(rows: list[KillRow]) -> None:
    print("(a) embedded Redis SIGKILLed and restarted (same port, same data dir) under a gateway")
    print(
        f"{'appendfsync':<11} {'kills':>5} {'calls':>6} {'ok':>6} {'unavail':>7} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'other':>5} {'restart ms':>10} "
        f"{'recovery ms':>15} {'idle gw failed':>14} {'acked':>6} {'lost':>4}"
    )
    for r in rows:
        recovery = "/".join(f"{v:.0f}" for v in r.recovery_ms)
        idle = "/".join(str(v) for v in r.idle_failed)
        print(
            f"{r.mode:<11} {r.kills:>5} {r.calls:>6} {r.ok:>6} {r.unavailable:>7} "
            f"{r.unavail_p50_ms:>7.1f} {r.unavail_p99_ms:>7.1f} {r.unavail_max_ms:>7.1f} "
            f"{sum(r.other.values()):>5} {r.restart_ms:>10.0f} {recovery:>15} {idle:>14} "
            f"{r.acked:>6} {r.lost:>4}"
        )
    print(
        "  calls/ok: tool calls of the loaded gateway and how many succeeded; unavail: answered\n"
        "  `unavailable`, with p50/p99/max latency; other: answers neither ok nor unavailable\n"
        "  (timeouts, HTTP 500, internal); restart ms: from restarting the killed Redis to\n"
        "  FT._LIST answering (worst kill); recovery ms: from that moment to the gateway's first\n"
        "  successful call, each kill (<= 0: it got through before the harness saw Redis up);\n"
        f"  idle gw failed: of {PROBE_CALLS} calls made one by one, once Redis was back, to a\n"
        "  second gateway that had no call during the outage, those not answered ok, each kill;\n"
        "  acked: creates acknowledged (both gateways); lost: of those, missing at the end"
    )
    for r in rows:
        if r.other:
            print(f"  {r.mode}: other answers {dict(r.other)}")
        if r.stale_reads:
            print(f"  {r.mode}: {r.stale_reads} reads of acknowledged notes did not find them")


def print_gateway_table(row: GatewayKillRow) -> None:
    rate = 100 * row.survivor_ok / row.survivor_calls if row.survivor_calls else float("nan")
    print("\n(b) two gateways on one Redis (appendfsync=always), one SIGKILLed mid-load")
    print(
        f"{'clients':>7} {'acked before':>12} {'acked after':>11} {'survivor calls':>14} "
        f"{'survivor ok %':>13} {'survivor p99 ms':>15} {'dead-gw errors':>14} "
        f"{'failovers':>9} {'lost':>4}"
    )
    print(
        f"{row.clients:>7} {row.acked_before:>12} {row.acked_after:>11} "
        f"{row.survivor_calls:>14} {rate:>13.2f} {row.survivor_p99_ms:>15.1f} "
        f"{row.dead_errors:>14} {row.failovers:>9} {row.lost:>4}"
    )
    print(
        "  survivor: calls sent to the surviving gateway after the kill; dead-gw errors: "
        "refused or reset calls\n  to the killed one (its clients then fail over to the "
        "survivor); lost: acknowledged by either, missing"
    )
    if row.survivor_errors:
        print(f"  survivor errors: {dict(row.survivor_errors)}")


def failures(kill_rows: list[KillRow], gw: GatewayKillRow, slow_ms: float) -> list[str]:
    found: list[str] = []
    for r in kill_rows:
        if r.mode == "always" and r.lost:
            found.append(f"appendfsync=always lost {r.lost} acknowledged writes")
        if r.other:
            found.append(f"{r.mode}: answers other than ok/unavailable: {dict(r.other)}")
        if r.unavail_max_ms > slow_ms:
            found.append(f"{r.mode}: an unavailable answer took {r.unavail_max_ms:.0f} ms")
        if any(v == float("inf") for v in r.recovery_ms):
            found.append(f"{r.mode}: the gateway never recovered after a Redis restart")
        if any(r.idle_failed):
            found.append(
                f"{r.mode}: a gateway idle through the outage failed {sum(r.idle_failed)} "
                "calls made after Redis was back"
            )
        if r.stale_reads and r.mode == "always":
            found.append(f"{r.mode}: {r.stale_reads} reads missed acknowledged notes")
    if gw.lost:
        found.append(f"gateway kill: {gw.lost} acknowledged writes lost")
    if gw.survivor_errors or not gw.survivor_calls:
        found.append(f"gateway kill: the survivor failed calls: {dict(gw.survivor_errors)}")
    if gw.stale_reads:
        found.append(f"gateway kill: {gw.stale_reads} reads missed acknowledged notes")
    return found


async def run(args: argparse.Namespace) -> int:
    token = issue_token()
    print(
        f"{args.clients} clients (create + read each, {args.backoff * 1000:.0f} ms pause after "
        f"a failed call), {args.kills} kills, {args.outage}s outage, {args.between}s between; "
        "2-core machine, load generator on the same machine\n"
    )
    kill_rows = [await redis_kills(mode, args, token) for mode in ("always", "everysec")]
    print_kill_table(kill_rows)
    gw = await gateway_kill(args, token)
    print_gateway_table(gw)
    found = failures(kill_rows, gw, args.slow_ms)
    for problem in found:
        print(f"FAIL: {problem}")
    return 1 if found else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--kills", type=int, default=3, help="Redis kills per appendfsync mode")
    parser.add_argument("--outage", type=float, default=2.0, help="seconds Redis stays down")
    parser.add_argument("--between", type=float, default=4.0, help="seconds after a restart")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before the first kill")
    parser.add_argument("--backoff", type=float, default=0.01, help="pause after a failed call")
    parser.add_argument("--call-timeout", type=float, default=10.0)
    parser.add_argument(
        "--slow-ms", type=float, default=1000.0, help="an unavailable answer slower is a failure"
    )
    args = parser.parse_args()
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
