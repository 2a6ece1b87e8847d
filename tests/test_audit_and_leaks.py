"""Every call is audited; no secret or token ever appears in a log line or a response."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import httpx
import orjson
import redis.asyncio as aioredis
from support import TEST_JWT_SECRET, GatewayProcess, agent_token, call, mcp_client

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis, RedisAuditLog


async def test_calls_allowed_and_refused_are_in_the_audit_stream(
    gateway: GatewayProcess, redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, read=["open"], write=["open"])
    async with mcp_client(gateway.mcp_url, token) as client:
        await call(client, "update_state", uri=f"bb://{workspace}/open/a", digest="d", body="b")
        err, _ = await call(client, "get_state", uris=[f"bb://{workspace}/closed/x"])
        assert err
    tail = subprocess.run(
        [sys.executable, "-m", "blackboard_mcp.cli", "audit", "tail", "--workspace", workspace],
        env={**os.environ, "BB_REDIS_URL": redis_server.url},
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [line.split("\t") for line in tail.stdout.strip().splitlines()]
    assert [(cols[1], cols[2], cols[3]) for cols in lines] == [
        ("agent-1", "update_state", "ok"),
        ("agent-1", "get_state", "forbidden"),
    ]
    assert lines[1][5] == f"bb://{workspace}/closed/x"


async def test_no_secret_or_token_reaches_a_log_or_a_response(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    bodies: list[str] = []
    async with mcp_client(gateway.mcp_url, token) as client:
        for tool, args in [
            ("update_state", {"uri": f"bb://{workspace}/t/a", "digest": "d", "body": "b"}),
            ("update_state", {"uri": "bad", "digest": "d"}),
            ("get_state", {"uris": [f"bb://{workspace}/t/a"], "mode": "full"}),
            ("search_keys", {"q": TEST_JWT_SECRET[:20]}),
            ("list_keys", {"topic": "t", "cursor": -1}),
        ]:
            _, body = await call(client, tool, **args)
            bodies.append(str(body))
    log = gateway.log_text()
    for text in [log, *bodies]:
        assert TEST_JWT_SECRET not in text
        assert token not in text
        assert token.split(".")[2] not in text


async def test_every_call_of_a_burst_is_audited_exactly_once(
    gateway: GatewayProcess, redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str
) -> None:
    headers = {
        "Authorization": f"Bearer {agent_token(issuer, workspace)}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    ids = [f"burst-{n:03d}" for n in range(40)]

    async def one(http: httpx.AsyncClient, request_id: str) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "list_keys", "arguments": {"topic": "t"}},
        }
        response = await http.post(
            gateway.mcp_url,
            content=orjson.dumps(body),
            headers={**headers, "X-Request-Id": request_id},
        )
        assert response.status_code == 200

    async with httpx.AsyncClient(timeout=30.0) as http:
        await asyncio.gather(*(one(http, rid) for rid in ids))
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        log = RedisAuditLog(client=client, maxlen=1000)
        deadline = asyncio.get_running_loop().time() + 5
        while True:
            records = await log.tail(workspace, 100)
            if len(records) >= len(ids) or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
    finally:
        await client.aclose()
    assert sorted(r.request_id for r in records) == ids
    assert {(r.tool, r.outcome) for r in records} == {("list_keys", "ok")}
