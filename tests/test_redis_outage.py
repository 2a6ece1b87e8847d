"""Redis stopped and restarted under a running gateway: fail fast, then recover unaided."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support import agent_token, call, mcp_client, start_gateway, stop_gateway

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis, RedisRateLimiter, RoutedClient


@pytest.mark.slow
async def test_calls_fail_fast_with_unavailable_and_recover_when_redis_returns(
    tmp_path: Path, issuer: TokenIssuer, workspace: str
) -> None:
    redis = EmbeddedRedis(data_dir=tmp_path / "redis", appendfsync="always").start()
    gateway = start_gateway(redis.url, tmp_path / "gw")
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/ops/note"
    try:
        async with mcp_client(gateway.mcp_url, token) as client:
            err, _ = await call(
                client, "update_state", uri=uri, digest="before", body="1", expect_version=0
            )
            assert not err
            redis.stop()
            started = time.perf_counter()
            err, body = await call(client, "get_state", uris=[uri])
            assert err and body["error"]["code"] == "unavailable"
            assert time.perf_counter() - started < 3.0
            redis.start()
            err, body = await call(client, "get_state", uris=[uri], mode="full")
            assert not err, body
            assert body["items"][0]["body"] == "1"
            err, body = await call(
                client, "update_state", uri=uri, digest="after", body="2", expect_version=1
            )
            assert not err and body["version"] == 2
    finally:
        stop_gateway(gateway)
        redis.stop()


async def test_the_rate_limit_is_shared_through_redis(redis_url: str) -> None:
    import redis.asyncio as aioredis

    first = aioredis.Redis.from_url(redis_url)
    second = aioredis.Redis.from_url(redis_url)
    try:
        a = RedisRateLimiter(client=RoutedClient(first, timeout_seconds=5.0), per_minute=5)
        b = RedisRateLimiter(client=RoutedClient(second, timeout_seconds=5.0), per_minute=5)
        verdicts = [await (a if i % 2 else b).hit("ws", "agent-x") for i in range(7)]
        assert verdicts[:5] == [None] * 5
        assert all(v is not None and 0 < v <= 60 for v in verdicts[5:])
        assert await a.hit("ws", "agent-y") is None
        assert await a.hit("other-ws", "agent-x") is None
        # The wait a refused call is told is what is left of the window, timed by Redis
        # (rounded up to a tenth; the lower bound leaves a busy machine over a second).
        window = a.window_key("ws", "agent-x")
        await first.pexpire(window, 2_450)
        wait = await b.hit("ws", "agent-x")
        assert wait is not None and 1.0 <= wait <= 2.5
        # The window closed (as its expiry would close it): the budget is whole again.
        await first.delete(window)
        assert [await a.hit("ws", "agent-x") for _ in range(5)] == [None] * 5
        assert await a.hit("ws", "agent-x") is not None
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.slow
async def test_the_rate_limit_holds_across_two_gateways_and_answers_rate_limited(
    redis_server: EmbeddedRedis, tmp_path: Path, issuer: TokenIssuer, workspace: str
) -> None:
    """Five calls a minute per subject, counted in Redis: the sixth is refused on either one."""
    limited = {"BB_RATE_LIMIT_PER_MINUTE": "5"}
    first = start_gateway(redis_server.url, tmp_path / "a", extra_env=limited)
    second = start_gateway(redis_server.url, tmp_path / "b", extra_env=limited)
    uri = f"bb://{workspace}/notes/n"
    busy, other = (
        agent_token(issuer, workspace, sub="busy"),
        agent_token(issuer, workspace, sub="calm"),
    )
    # The subject's window opens with its first call and lasts a minute, timed by Redis: the
    # six calls below take a second or two, so a minute is a generous bound even on a busy
    # machine.
    try:
        async with (
            mcp_client(first.mcp_url, busy) as on_first,
            mcp_client(second.mcp_url, busy) as on_second,
            mcp_client(second.mcp_url, other) as calm,
        ):
            for i in range(5):
                err, body = await call(on_first if i % 2 else on_second, "get_state", uris=[uri])
                assert not err, body
            for client in (on_first, on_second):
                err, body = await call(client, "update_state", uri=uri, digest="refused", body="x")
                assert err
                error = body["error"]
                assert error["code"] == "rate_limited"
                assert 0 < error["retry_after"] <= 60
                assert "retry_after" in error["hint"]
            err, body = await call(calm, "get_state", uris=[uri])
            assert not err, body
            err, body = await call(calm, "get_state", uris=[uri], mode="ref")
            assert body["items"][0]["error"] == "not_found"  # the refused writes wrote nothing
    finally:
        stop_gateway(first)
        stop_gateway(second)
