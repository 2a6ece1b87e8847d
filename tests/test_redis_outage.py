"""Redis stopped and restarted under a running gateway: fail fast, then recover unaided."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support import agent_token, call, mcp_client, start_gateway, stop_gateway

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis, RedisRateLimiter


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
        a = RedisRateLimiter(client=first, per_minute=5)
        b = RedisRateLimiter(client=second, per_minute=5)
        verdicts = [await (a if i % 2 else b).hit("agent-x") for i in range(7)]
        assert verdicts[:5] == [None] * 5
        assert all(v is not None and 0 < v <= 60 for v in verdicts[5:])
        assert await a.hit("agent-y") is None
    finally:
        await first.aclose()
        await second.aclose()
