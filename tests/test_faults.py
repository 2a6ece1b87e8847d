"""Crashes under load: a SIGKILLed Redis loses no acknowledged write from its AOF and fails
calls fast while it is down (the kernel keeps a killed process's writes, so this proves the
AOF, not fsync: test_embedded_persistence checks that fsync always leaves no dirty page);
a SIGKILLed gateway leaves its peer answering, with every acknowledged write on the board; a
gateway idle through a Redis restart answers once it is back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from support import (
    GatewayProcess,
    agent_token,
    call,
    mcp_client,
    start_gateway,
    stop_gateway,
)

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis

# Generous for a loaded 2-core machine: a call stuck on a dead Redis would sit at the
# store's 5 s socket timeout or beyond.
FAST_FAILURE_S = 1.0
BURST = 16
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


@dataclass(frozen=True)
class Rig:
    """One Redis with appendfsync always and two gateways on it: the gateway test SIGKILLs
    ``victim``; the Redis tests kill and restart ``redis`` under ``gateway``."""

    redis: EmbeddedRedis
    victim: GatewayProcess
    gateway: GatewayProcess


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    work = tmp_path_factory.mktemp("faults")
    redis = EmbeddedRedis(data_dir=work / "redis", appendfsync="always").start()
    # A gateway spends most of its start importing the MCP SDK: start both side by side.
    with ThreadPoolExecutor(2) as pool:
        starting = [pool.submit(start_gateway, redis.url, work / name) for name in "vg"]
    try:
        victim, gateway = (future.result() for future in starting)
    except Exception:
        for future in starting:
            if future.exception() is None:
                stop_gateway(future.result())
        redis.stop()
        raise
    yield Rig(redis, victim, gateway)
    stop_gateway(victim)
    stop_gateway(gateway)
    redis.stop()


@dataclass
class Writers:
    """Clients creating distinct notes through raw tools/call POSTs: what was acknowledged,
    through which gateway, and how every other call ended."""

    workspace: str
    urls: list[str]
    acked: dict[str, str] = field(default_factory=dict)
    acked_via: list[int] = field(default_factory=lambda: [0, 0])
    # (gateway index, outcome, seconds); outcome is a tool error code or "transport".
    failures: list[tuple[int, str, float]] = field(default_factory=list)

    async def create(self, http: httpx.AsyncClient, gateway: int, name: str) -> str:
        uri = f"bb://{self.workspace}/crash/{name}"
        digest = f"note {name}"
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "update_state",
                "arguments": {"uri": uri, "digest": digest, "body": name, "expect_version": 0},
            },
        }
        started = time.perf_counter()
        try:
            response = await http.post(self.urls[gateway], content=orjson.dumps(request))
        except httpx.TransportError:
            self.failures.append((gateway, "transport", time.perf_counter() - started))
            return "transport"
        # Whatever happens behind it, a live gateway answers with a tool result, never a 500.
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()["result"]
        body = result["structuredContent"]
        if result.get("isError"):
            code: str = body["error"]["code"]
            self.failures.append((gateway, code, time.perf_counter() - started))
            return code
        assert body["version"] == 1, body
        self.acked[uri] = digest
        self.acked_via[gateway] += 1
        return "ok"


def _http(token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=10)


async def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the load never reached the point of the fault"
        await asyncio.sleep(0.01)


async def _missing(gateway: GatewayProcess, token: str, acked: dict[str, str]) -> list[str]:
    """Read every acknowledged note through the SDK client; return those not as written."""
    missing: list[str] = []
    uris = sorted(acked)
    async with mcp_client(gateway.mcp_url, token) as client:
        for start in range(0, len(uris), 100):
            batch = uris[start : start + 100]
            err, body = await call(client, "get_state", uris=batch, budget_tokens=100_000)
            assert not err, body
            items = {item["uri"]: item for item in body["items"]}
            missing += [
                uri
                for uri in batch
                if items[uri].get("version") != 1 or items[uri].get("digest") != acked[uri]
            ]
    return missing


async def _burst(writers: Writers, http: httpx.AsyncClient, gateway: int, name: str) -> list[str]:
    """BURST creates side by side through one gateway: enough to touch every pooled Redis
    connection it holds."""
    names = [f"{name}-{i}" for i in range(BURST)]
    return list(await asyncio.gather(*(writers.create(http, gateway, n) for n in names)))


@pytest.mark.slow
async def test_a_gateway_sigkill_leaves_its_peer_answering_with_every_acknowledged_write(
    rig: Rig, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="fault-writer")
    writers = Writers(workspace, [rig.victim.mcp_url, rig.gateway.mcp_url])
    killed = asyncio.Event()

    async def writer(http: httpx.AsyncClient, cid: int) -> None:
        # Clients of the victim move to the survivor, as behind a load balancer; every client
        # goes on until it has written five notes through the survivor after the kill.
        target, i, survived = cid % 2, 0, 0
        while survived < 5:
            after_kill = killed.is_set()
            outcome = await writers.create(http, target, f"c{cid}-{i}")
            i += 1
            if outcome == "transport":
                assert target == 0 and killed.is_set(), writers.failures
                target = 1
                continue
            # The survivor answers every call, before and after its peer dies.
            assert outcome == "ok", writers.failures
            if after_kill and target == 1:
                survived += 1

    async with asyncio.timeout(30), _http(token) as http:
        async with asyncio.TaskGroup() as load:
            for cid in range(4):
                load.create_task(writer(http, cid))
            await _wait_for(lambda: min(writers.acked_via) >= 8)
            # Synchronous on purpose: no writer runs between the kill and `killed` being set.
            rig.victim.process.kill()
            rig.victim.process.wait()
            killed.set()
        assert all(gateway == 0 for gateway, _, _ in writers.failures), writers.failures
        assert await _missing(rig.gateway, token, writers.acked) == []


@pytest.mark.slow
async def test_writes_acknowledged_before_a_redis_sigkill_are_read_back_from_the_aof(
    rig: Rig, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="fault-writer")
    writers = Writers(workspace, [rig.gateway.mcp_url])

    async def writer(http: httpx.AsyncClient, cid: int) -> None:
        # Write until Redis is gone, then until three calls came back unavailable.
        i, unavailable = 0, 0
        while unavailable < 3:
            outcome = await writers.create(http, 0, f"c{cid}-{i}")
            i += 1
            if outcome == "ok":
                # Once Redis is gone nothing can succeed until it is back.
                assert unavailable == 0
            else:
                assert outcome == "unavailable", writers.failures
                unavailable += 1

    try:
        async with asyncio.timeout(30), _http(token) as http:
            async with asyncio.TaskGroup() as load:
                for cid in range(4):
                    load.create_task(writer(http, cid))
                # SIGKILL while every writer has a create in flight or about to be.
                await _wait_for(lambda: len(writers.acked) >= 24)
                await asyncio.to_thread(rig.redis.kill)
            slowest = max(seconds for _, _, seconds in writers.failures)
            assert slowest < FAST_FAILURE_S, writers.failures

            await asyncio.to_thread(rig.redis.start)
            # The same gateway process, never restarted, reads every acknowledged write back
            # at the first try: no pooled connection from before the restart answers
            # `unavailable` once Redis is back.
            assert await _missing(rig.gateway, token, writers.acked) == []
    finally:
        # Leave a running Redis behind for the other tests, whatever happened here.
        if not rig.redis.running:
            rig.redis.start()


@pytest.mark.slow
async def test_a_gateway_idle_through_a_redis_restart_answers_every_call_after_it(
    rig: Rig, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="fault-writer")
    writers = Writers(workspace, [rig.gateway.mcp_url])
    try:
        async with asyncio.timeout(30), _http(token) as http:
            # A burst leaves pooled Redis connections behind in the gateway; then it idles
            # while Redis is killed and restarted.
            assert set(await _burst(writers, http, 0, "before")) == {"ok"}, writers.failures
            await asyncio.to_thread(rig.redis.kill)
            await asyncio.to_thread(rig.redis.start)
            # Redis is back and answering before the next call arrives: there is no outage
            # left to report, so every call must succeed, one at a time and side by side.
            writers.failures.clear()
            alone = [await writers.create(http, 0, f"alone-{i}") for i in range(4)]
            together = await _burst(writers, http, 0, "together")
            failed = [code for _, code, _ in writers.failures]
            assert failed == [], (
                f"Redis up, yet {len(failed)} of {len(alone) + len(together)} calls failed "
                f"({', '.join(sorted(set(failed)))}): {len(alone) - alone.count('ok')} of the "
                f"{len(alone)} one at a time, {len(together) - together.count('ok')} of the "
                f"{len(together)} side by side"
            )
    finally:
        if not rig.redis.running:
            rig.redis.start()
