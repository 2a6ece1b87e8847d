"""Resources, listens and the board page's endpoints: each admitted on its own requirements
from contracts/board.tb, refused before it runs when the token lacks them, and audited under
its own name."""

from __future__ import annotations

import asyncio
import time

import pytest
from app_support import InProcessGateway
from mcp.shared.exceptions import MCPError
from support import admin_token, agent_token, call

from blackboard_mcp.auth import AuditRecord, TokenIssuer, load_board_contract
from blackboard_mcp.gateway._resources import LIST, READ
from blackboard_mcp.gateway.listening._subscriptions import LISTEN
from blackboard_mcp.gateway.page._routes import ACTIVITY, AUDIT, EVENTS, TOPICS
from blackboard_mcp.store import RedisAuditLog, SingleRedis, board_client

# What the audit names each of them; docs/operations.md lists them.
ENDPOINTS = (
    "resources/list",
    "resources/read",
    "subscriptions/listen",
    "board/topics",
    "board/activity",
    "board/events",
    "board/audit",
)


def addr(ws: str, rest: str) -> str:
    return f"bb://{ws}/{rest}"


async def audit_records(redis_url: str, workspace: str, count: int) -> list[AuditRecord]:
    """The workspace's audit records, oldest first, once there are ``count`` of them."""
    client = board_client(redis_url)
    try:
        log = RedisAuditLog(redis=SingleRedis(client), maxlen=1000)
        deadline = time.monotonic() + 10
        while True:
            records = (await log.tail(workspace, 50))[::-1]
            # The gateway writes its audit records in the background.
            if len(records) >= count or time.monotonic() > deadline:
                return records
            await asyncio.sleep(0.05)
    finally:
        await client.aclose()


def test_the_contract_states_each_endpoints_requirements() -> None:
    contract = load_board_contract()
    # The names the gateway serves them under: each declared, none declared and unserved.
    served = (LIST, READ, LISTEN, TOPICS, ACTIVITY, EVENTS, AUDIT)
    assert set(contract.endpoints) == set(ENDPOINTS) == set(served)
    for name in ENDPOINTS:
        endpoint = contract.endpoints[name]
        assert endpoint.audit_name == name
        assert not endpoint.memory_writes
        if name == AUDIT:
            # The audit tail is an admin's, and reads the audit log, not the notes.
            assert endpoint.capabilities_for(set()) == {"admin"}
            assert endpoint.memory_reads == {"Audit"}
        else:
            assert endpoint.capabilities_for(set()) == {"board_read"}
            assert endpoint.memory_reads == {"Board"}


async def test_resources_are_audited_under_their_own_names(
    app_gateway: InProcessGateway, redis_url: str, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    async with app_gateway.mcp_client(token) as client:
        await call(client, "update_state", uri=addr(workspace, "facts/a"), digest="A.", body="a")
        await client.list_resources()
        await client.read_resource(addr(workspace, "facts/a"))
        await client.read_resource(addr(workspace, "facts"))
        with pytest.raises(MCPError):
            await client.read_resource(addr(workspace, "facts/none"))
    records = await audit_records(redis_url, workspace, 5)
    assert [(r.tool, r.outcome, r.addresses) for r in records] == [
        ("update_state", "ok", (addr(workspace, "facts/a"),)),
        ("resources/list", "ok", ()),
        ("resources/read", "ok", (addr(workspace, "facts/a"),)),
        ("resources/read", "ok", (addr(workspace, "facts"),)),
        ("resources/read", "not_found", (addr(workspace, "facts/none"),)),
    ]


async def test_the_pages_endpoints_are_audited_under_their_own_names(
    app_gateway: InProcessGateway, redis_url: str, issuer: TokenIssuer, workspace: str
) -> None:
    headers = {"Authorization": f"Bearer {agent_token(issuer, workspace)}"}
    http = app_gateway.http
    assert (await http.get("/board/api/topics", headers=headers)).status_code == 200
    assert (await http.get("/board/api/activity", headers=headers)).status_code == 200
    # The feed is admitted (and audited) before its stream starts.
    events_status, _ = await app_gateway.response_head("/board/api/events", headers)
    assert events_status == 200
    listed = await http.post(
        "/board/api/call",
        json={"tool": "list_keys", "arguments": {"topic": "facts"}},
        headers=headers,
    )
    assert listed.status_code == 200
    records = await audit_records(redis_url, workspace, 4)
    # A tool called from the page is that tool's call.
    assert [(r.tool, r.outcome) for r in records] == [
        ("board/topics", "ok"),
        ("board/activity", "ok"),
        ("board/events", "ok"),
        ("list_keys", "ok"),
    ]


async def test_a_token_without_what_a_resource_requires_is_refused_before_it_runs(
    app_gateway: InProcessGateway, redis_url: str, issuer: TokenIssuer, workspace: str
) -> None:
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as writer:
        await call(writer, "update_state", uri=addr(workspace, "facts/a"), digest="A.", body="a")
    # Reads every topic, but was never given the capability to read the board.
    writer_only = agent_token(issuer, workspace, caps=["board_write"])
    async with app_gateway.mcp_client(writer_only) as client:
        with pytest.raises(MCPError) as listed:
            await client.list_resources()
        with pytest.raises(MCPError) as read:
            await client.read_resource(addr(workspace, "facts/a"))
        with pytest.raises(MCPError) as topic:
            await client.read_resource(addr(workspace, "facts"))
        with pytest.raises(MCPError) as listen:
            async with client.listen(resource_subscriptions=[addr(workspace, "facts/a")]):
                pass
    for refused, name in (
        (listed, "resources/list"),
        (read, "resources/read"),
        (topic, "resources/read"),
        (listen, "subscriptions/listen"),
    ):
        assert refused.value.error.data["code"] == "forbidden"
        assert refused.value.error.data["message"] == (f"{name} requires capability 'board_read'")
    records = await audit_records(redis_url, workspace, 5)
    assert [(r.tool, r.outcome) for r in records[1:]] == [
        ("resources/list", "forbidden"),
        ("resources/read", "forbidden"),
        ("resources/read", "forbidden"),
        ("subscriptions/listen", "forbidden"),
    ]


async def test_a_token_without_what_a_page_endpoint_requires_is_refused_before_it_runs(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    writer_only = agent_token(issuer, workspace, caps=["board_write"])
    headers = {"Authorization": f"Bearer {writer_only}"}
    http = app_gateway.http
    answers = {
        "board/topics": await http.get("/board/api/topics", headers=headers),
        "board/activity": await http.get("/board/api/activity", headers=headers),
        # A refused feed is a JSON answer: no stream is opened.
        "board/events": await http.get("/board/api/events", headers=headers),
    }
    for name, answer in answers.items():
        assert answer.status_code == 403, name
        assert answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert (error["code"], error["message"]) == (
            "forbidden",
            f"{name} requires capability 'board_read'",
        )


async def test_a_revoked_admin_token_cannot_read_the_audit_tail(
    app_gateway: InProcessGateway, redis_url: str, issuer: TokenIssuer, workspace: str
) -> None:
    revoked = admin_token(issuer, workspace, sub="admin-1")
    other = admin_token(issuer, workspace, sub="admin-2")
    http = app_gateway.http
    readable = await http.get("/board/api/audit", headers={"Authorization": f"Bearer {revoked}"})
    assert readable.status_code == 200
    assert "records" in readable.json()
    answer = await http.post(
        "/admin/revoke",
        json={"token": revoked},
        headers={"Authorization": f"Bearer {other}"},
    )
    assert answer.status_code == 200, answer.text
    revoked_headers = {"Authorization": f"Bearer {revoked}"}
    topics = await http.get("/board/api/topics", headers=revoked_headers)
    tail = await http.get("/board/api/audit", headers=revoked_headers)
    # The same refusal as every other way in: the revoked token reads nothing of the log.
    assert topics.status_code == tail.status_code == 401
    assert tail.json()["error"]["code"] == topics.json()["error"]["code"]
    assert "records" not in tail.json()
    records = await audit_records(redis_url, workspace, 4)
    assert [(r.tool, r.subject) for r in records if r.tool.startswith("board/")] == [
        ("board/audit", "admin-1"),
        ("board/topics", "admin-1"),
        ("board/audit", "admin-1"),
    ]
