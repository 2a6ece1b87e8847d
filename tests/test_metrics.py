"""The gateway's call metrics count each call once, under its own tool and outcome."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from app_support import InProcessGateway
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from support import GatewayProcess, agent_token, call, mcp_client, start_gateway, stop_gateway

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis

SAMPLE = re.compile(r"^(bb_\w+?)(?:_total|_count)?\{([^}]*)\} (\S+)$", re.MULTILINE)


def parsed(text: str) -> dict[tuple[str, str], float]:
    return {(name, labels): float(value) for name, labels, value in SAMPLE.findall(text)}


def samples(gateway: GatewayProcess) -> dict[tuple[str, str], float]:
    return parsed(httpx.get(gateway.url + "/metrics").text)


async def app_samples(gateway: InProcessGateway) -> dict[tuple[str, str], float]:
    return parsed((await gateway.http.get("/metrics")).text)


CALL_METRICS = ("bb_tool_calls", "bb_tool_latency_seconds", "bb_refused_calls")


def increases(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]
) -> dict[tuple[str, str], float]:
    """The call metrics' series that moved (counts only: latencies are the clock's)."""
    return {
        key: value - before.get(key, 0.0)
        for key, value in after.items()
        if key[0] in CALL_METRICS and value != before.get(key, 0.0)
    }


async def test_each_call_counts_once_under_its_tool_and_outcome_and_refusals_under_their_code(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, read=["open"], write=["open"])
    before = await app_samples(app_gateway)
    async with app_gateway.mcp_client(token) as client:
        for n in range(3):
            err, _ = await call(
                client, "update_state", uri=f"bb://{workspace}/open/a", digest=f"d{n}", body=""
            )
            assert not err
        for _ in range(2):
            err, body = await call(client, "get_state", uris=[f"bb://{workspace}/closed/x"])
            assert not err and body["items"][0]["error"] == "forbidden"
        err, _ = await call(client, "get_state", uris=[f"bb://{workspace}/open/a"])
        assert not err
    assert increases(before, await app_samples(app_gateway)) == {
        ("bb_tool_calls", 'outcome="ok",tool="update_state"'): 3.0,
        ("bb_tool_calls", 'outcome="forbidden",tool="get_state"'): 2.0,
        ("bb_tool_calls", 'outcome="ok",tool="get_state"'): 1.0,
        ("bb_tool_latency_seconds", 'tool="update_state"'): 3.0,
        ("bb_tool_latency_seconds", 'tool="get_state"'): 3.0,
        ("bb_refused_calls", 'code="forbidden"'): 2.0,
    }


async def test_calls_to_tools_that_do_not_exist_share_one_series_whatever_name_they_send(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, read=["open"], write=["open"])
    names = [f"no_such_tool_{n}_{workspace}" for n in range(3)]
    before = await app_samples(app_gateway)
    async with app_gateway.mcp_client(token) as client:
        for name in names:
            # The spec's answer: a JSON-RPC invalid-params error, the tool error as its data.
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, {})
            assert refused.value.code == INVALID_PARAMS
            assert refused.value.error.data["code"] == "invalid_argument"
            assert "update_state" in refused.value.error.data["hint"]
    text = (await app_gateway.http.get("/metrics")).text
    # A client choosing the names must not be able to add series to /metrics without end.
    assert not [name for name in names if name in text]
    moved = increases(before, parsed(text))
    assert {key: value for key, value in moved.items() if 'tool="unknown"' in key[1]} == {
        ("bb_tool_calls", 'outcome="invalid_argument",tool="unknown"'): 3.0,
        ("bb_tool_latency_seconds", 'tool="unknown"'): 3.0,
    }, moved


async def test_a_listen_counts_under_its_own_name_not_as_the_get_state_that_admits_it(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, read=["open"], write=["open"])
    before = samples(gateway)
    async with (
        mcp_client(gateway.mcp_url, token) as client,
        client.listen(resource_subscriptions=[f"bb://{workspace}/open/a"]),
    ):
        pass
    assert increases(before, samples(gateway)) == {
        ("bb_tool_calls", 'outcome="ok",tool="subscriptions/listen"'): 1.0,
        ("bb_tool_latency_seconds", 'tool="subscriptions/listen"'): 1.0,
    }


def test_latency_buckets_count_each_value_at_or_below_their_bound_cumulatively() -> None:
    # The call metrics are counted without prometheus_client's locks (gateway/_metrics.py);
    # what /metrics says must still be what Prometheus' histogram semantics say.
    from blackboard_mcp.gateway._metrics import GatewayMetrics

    metrics = GatewayMetrics()
    for seconds in (0.0005, 0.001, 0.0011, 0.005, 0.3, 9.0):
        metrics.latency.labels("get_state").observe(seconds)
    metrics.calls.labels("get_state", "ok").inc()
    metrics.conflicts.inc()
    text = metrics.render().decode()
    buckets = dict(
        re.findall(
            r'^bb_tool_latency_seconds_bucket\{le="([^"]+)",tool="get_state"\} (\S+)$', text, re.M
        )
    )
    assert {le: float(n) for le, n in buckets.items()} == {
        "0.001": 2.0,
        "0.0025": 3.0,
        "0.005": 4.0,
        "0.01": 4.0,
        "0.025": 4.0,
        "0.05": 4.0,
        "0.1": 4.0,
        "0.25": 4.0,
        "0.5": 5.0,
        "1.0": 5.0,
        "2.5": 5.0,
        "+Inf": 6.0,
    }
    assert 'bb_tool_latency_seconds_count{tool="get_state"} 6.0' in text
    assert re.search(r'^bb_tool_latency_seconds_sum\{tool="get_state"\} 9\.30', text, re.M)
    assert 'bb_tool_calls_total{outcome="ok",tool="get_state"} 1.0' in text
    assert "bb_conflicts_total 1.0" in text
    assert "bb_direct_tool_calls_total 0.0" in text


async def test_every_scrape_of_a_gateway_with_two_workers_counts_every_workers_calls(
    redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str, tmp_path: Path
) -> None:
    # Prometheus reads a drop in a counter as a restart: a scrape answered by one worker
    # must count the calls every worker answered, or rate() sees resets every other scrape.
    gateway = start_gateway(redis_server.url, tmp_path / "gw", workers=2)
    try:
        token = agent_token(issuer, workspace)
        writes = 60
        # A fresh connection per call: the kernel spreads them over both workers.
        for n in range(writes):
            async with mcp_client(gateway.mcp_url, token) as client:
                err, _ = await call(
                    client, "update_state", uri=f"bb://{workspace}/m/n{n}", digest="d", body=""
                )
                assert not err
        key = ("bb_tool_calls", 'outcome="ok",tool="update_state"')
        seen = []
        for _ in range(8):
            with httpx.Client() as fresh:  # a new connection: either worker may answer
                text = fresh.get(gateway.url + "/metrics").text
            found = parsed(text)
            seen.append(found.get(key, 0.0))
        assert seen == [float(writes)] * 8
    finally:
        stop_gateway(gateway)
