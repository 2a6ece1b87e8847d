"""Every call is audited; no secret or token ever appears in a log line or a response.

Audits through the gateway's app in process; the logs are a gateway process's own, as `serve`
sets them up.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
from app_support import MCP_PATH, InProcessGateway, in_process_gateway
from support import (
    TEST_JWT_SECRET,
    agent_token,
    call,
    mcp_client,
    start_gateway,
    stop_gateway,
)

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis, RedisAuditLog, SingleRedis, board_client


async def test_calls_allowed_and_refused_are_in_the_audit_stream(
    redis_url: str, tmp_path: Path, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, read=["open"], write=["open"])
    # The audit is written off the call's path; leaving the app's lifespan writes what is queued.
    async with (
        in_process_gateway(redis_url, tmp_path) as gateway,
        gateway.mcp_client(token) as client,
    ):
        await call(client, "update_state", uri=f"bb://{workspace}/open/a", digest="d", body="b")
        err, body = await call(client, "get_state", uris=[f"bb://{workspace}/closed/x"])
        # Answered item by item, and audited as the refusal it holds.
        assert not err and body["items"][0]["error"] == "forbidden"
    tail = subprocess.run(
        [
            sys.executable,
            "-m",
            "blackboard_mcp.cli",
            "audit",
            "tail",
            "--workspace",
            workspace,
            "--json",
        ],
        env={**os.environ, "BB_REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        check=True,
    )
    records = [json.loads(line) for line in tail.stdout.strip().splitlines()]
    assert [(r["subject"], r["tool"], r["outcome"]) for r in records] == [
        ("agent-1", "update_state", "ok"),
        ("agent-1", "get_state", "forbidden"),
    ]
    assert records[1]["addresses"] == [f"bb://{workspace}/closed/x"]


async def test_no_secret_or_token_reaches_a_log_or_a_response(
    redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str, tmp_path: Path
) -> None:
    # At DEBUG, where successful calls are logged too: at INFO only refusals are.
    gateway = start_gateway(redis_server.url, tmp_path / "gw", extra_env={"BB_LOG_LEVEL": "DEBUG"})
    token = agent_token(issuer, workspace)
    bodies: list[str] = []
    try:
        async with mcp_client(gateway.mcp_url, token) as client:
            for tool, args in [
                ("update_state", {"uri": f"bb://{workspace}/t/a", "digest": "d", "body": "b"}),
                ("update_state", {"uri": "bad", "digest": "d"}),
                ("get_state", {"uris": [f"bb://{workspace}/t/a"], "mode": "full"}),
                # The whole secret and the whole token as arguments: neither may be echoed.
                ("search_keys", {"q": TEST_JWT_SECRET}),
                ("search_keys", {"q": token}),
                ("list_keys", {"topic": "t", "cursor": -1}),
            ]:
                _, body = await call(client, tool, **args)
                bodies.append(str(body))
    finally:
        stop_gateway(gateway)
    log = gateway.log_text()
    assert "tool call search_keys ok" in log  # the successful calls' lines are in it
    for text in [log, *bodies]:
        assert TEST_JWT_SECRET not in text
        assert token not in text
        assert token.split(".")[2] not in text


async def test_every_call_of_a_burst_is_audited_exactly_once(
    app_gateway: InProcessGateway, redis_url: str, issuer: TokenIssuer, workspace: str
) -> None:
    headers = {
        "Authorization": f"Bearer {agent_token(issuer, workspace)}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    ids = [f"burst-{n:03d}" for n in range(40)]

    async def one(request_id: str) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "list_keys", "arguments": {"topic": "t"}},
        }
        response = await app_gateway.http.post(
            MCP_PATH,
            content=orjson.dumps(body),
            headers={**headers, "X-Request-Id": request_id},
        )
        assert response.status_code == 200

    await asyncio.gather(*(one(rid) for rid in ids))
    client = board_client(redis_url)
    try:
        log = RedisAuditLog(redis=SingleRedis(client), maxlen=1000)
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


async def test_json_logs_carry_request_ids_and_outcomes_but_no_token_or_arguments(
    redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str, tmp_path: Path
) -> None:
    gateway = start_gateway(redis_server.url, tmp_path / "gw", extra_env={"BB_LOG_FORMAT": "json"})
    token = agent_token(issuer, workspace, read=["open"], write=["open"])
    secret_text = "body-text-that-must-not-be-logged"
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            for request_id, tool, arguments in [
                (
                    "req-ok",
                    "update_state",
                    {"uri": f"bb://{workspace}/open/a", "digest": "d", "body": secret_text},
                ),
                ("req-refused", "get_state", {"uris": [f"bb://{workspace}/closed/x"]}),
            ]:
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments},
                }
                response = await http.post(
                    gateway.mcp_url,
                    content=orjson.dumps(body),
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream",
                        "MCP-Protocol-Version": "2025-06-18",
                        "X-Request-Id": request_id,
                    },
                )
                assert response.status_code == 200
    finally:
        stop_gateway(gateway)
    lines = [line for line in gateway.log_text().splitlines() if line.startswith("{")]
    records = [orjson.loads(line) for line in lines]
    assert records, gateway.log_text()
    refused = [r for r in records if r.get("request_id") == "req-refused"]
    assert len(refused) == 1
    assert refused[0]["tool"] == "get_state" and refused[0]["outcome"] == "forbidden"
    assert refused[0]["sub"] == "agent-1" and refused[0]["level"] == "INFO"
    # A successful call is logged at DEBUG only; the audit stream has every call.
    assert not [r for r in records if r.get("request_id") == "req-ok"]
    text = gateway.log_text()
    assert token not in text and secret_text not in text
