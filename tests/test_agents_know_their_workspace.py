"""An agent finds its workspace's catch-up note and reads it, whatever topics its token reads.

The tool description names the catch-up address without a workspace that could be taken for
a real one; a call to another workspace is refused with the same address in the token's own
as its hint; the catch-up note is readable by every reader of its workspace, and nothing else
of its topic is. Through the gateway in process (listens, which stream, through a gateway
process and the SDK's client), on the real Redis.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from app_support import InProcessGateway, in_process_gateway
from mcp.client.subscriptions import ResourceUpdated, Subscription
from mcp.shared.exceptions import MCPError
from support import GatewayProcess, agent_token, call, mcp_client

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import is_valid_name

# The token of the report: it reads two topics, neither of them ``run``.
READ = ["plan", "research"]


@pytest.fixture
async def app(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    async with in_process_gateway(redis_url, tmp_path, rate_limit_per_minute=1_000_000) as gw:
        yield gw


def catch_up(workspace: str) -> str:
    return f"bb://{workspace}/run/state/current"


def reader(issuer: TokenIssuer, workspace: str, read: list[str] = READ) -> str:
    return agent_token(issuer, workspace, sub="reader", read=read, write=[], caps=["board_read"])


async def written(app: InProcessGateway, issuer: TokenIssuer, workspace: str) -> str:
    """The catch-up note at version 2 and another note of ``run``; the writer's token."""
    writer = agent_token(issuer, workspace, sub="lead")
    for n in (1, 2):
        await app.ok(
            writer,
            "update_state",
            uri=catch_up(workspace),
            digest=f"Step {n} of 5.",
            body=f"goal: ship; step {n}",
        )
    await app.ok(
        writer,
        "update_state",
        uri=f"bb://{workspace}/run/private",
        digest="Quarterly payroll run log.",
        body="payroll",
    )
    return writer


def refusal(body: dict[str, Any]) -> tuple[str, str, str]:
    error = body["error"]
    return error["code"], error["message"], error["hint"]


# --- 1. a foreign workspace's refusal names the address the call meant ----------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "meant"),
    [
        ("get_state", {"uris": ["bb://ws/run/state/current"]}, "run/state/current"),
        ("get_state", {"uris": ["bb://ws/facts/a@3"]}, "facts/a@3"),
        ("list_keys", {"topic": "bb://ws/facts/a"}, "facts/a"),
        ("update_state", {"uri": "bb://ws/facts/a", "digest": "A.", "body": ""}, "facts/a"),
        (
            "link_state",
            {"src": "bb://ws/facts/a", "rel": "cites", "dst": ["bb://ws/facts/b"]},
            "facts/a",
        ),
    ],
    ids=["the-catch-up-note", "a-past-version", "a-notes-versions", "a-write", "a-link"],
)
async def test_a_call_to_another_workspace_is_told_the_address_in_its_own(
    app: InProcessGateway,
    issuer: TokenIssuer,
    workspace: str,
    tool: str,
    arguments: dict[str, Any],
    meant: str,
) -> None:
    is_error, body = await app.call(agent_token(issuer, workspace), tool, **arguments)
    assert is_error
    assert refusal(body) == (
        "forbidden",
        f"the token is for workspace {workspace!r}, not 'ws'",
        f"use bb://{workspace}/{meant}",
    )


async def test_a_resource_read_of_another_workspace_is_told_the_address_in_its_own(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    note = await app.rpc(token, "resources/read", {"uri": "bb://ws/run/state/current"})
    topic = await app.rpc(token, "resources/read", {"uri": "bb://ws/research"})
    assert note["error"]["data"]["hint"] == f"use {catch_up(workspace)}"
    assert topic["error"]["data"]["hint"] == f"use bb://{workspace}/research"
    assert (
        topic["error"]["data"]["message"] == f"the token is for workspace {workspace!r}, not 'ws'"
    )


# --- 2. the description's catch-up address is not a workspace's ------------------------------


async def test_the_described_catch_up_address_cannot_be_taken_for_a_workspace(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    answer = await app.rpc(agent_token(issuer, workspace), "tools/list", {})
    [described] = [t for t in answer["result"]["tools"] if t["name"] == "get_state"]
    named = re.search(r"bb://([^/]+)/run/state/current", described["description"])
    assert named is not None, described
    # A valid workspace name there is one an agent would call as it stands.
    assert not is_valid_name(named[1]), named[0]


# --- 3. every reader of the workspace reads the catch-up note, and only it of ``run`` --------


async def test_a_token_without_run_reads_the_catch_up_note_its_versions_and_parts(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    await written(app, issuer, workspace)
    token = reader(issuer, workspace)
    current = await app.ok(token, "get_state", uris=[catch_up(workspace)])
    past = await app.ok(token, "get_state", uris=[f"{catch_up(workspace)}@1"])
    part = await app.ok(token, "get_state", uris=[f"{catch_up(workspace)}@2#6"])
    versions = await app.ok(token, "list_keys", topic=catch_up(workspace))
    assert [i.get("digest") for i in current["items"]] == ["Step 2 of 5."]
    assert [i.get("digest") for i in past["items"]] == ["Step 1 of 5."]
    assert [i.get("body") for i in part["items"]] == ["ship; step 2"]
    assert [i["uri"] for i in versions["items"]] == [
        f"{catch_up(workspace)}@2",
        f"{catch_up(workspace)}@1",
    ]
    assert "warnings" not in current


async def test_a_token_that_reads_no_topic_reads_the_catch_up_note(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    await written(app, issuer, workspace)
    token = reader(issuer, workspace, read=[])
    answer = await app.ok(token, "get_state", uris=[catch_up(workspace)])
    assert [i.get("digest") for i in answer["items"]] == ["Step 2 of 5."]
    # Anything else still asks for a topic the token reads.
    is_error, body = await app.call(token, "list_keys")
    assert is_error and body["error"]["code"] == "forbidden"


async def test_a_missing_catch_up_note_says_what_it_is_to_any_reader(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    answer = await app.ok(reader(issuer, workspace), "get_state", uris=[catch_up(workspace)])
    [item] = answer["items"]
    assert item["error"] == "not_found" and "catch-up note" in item["hint"]


async def test_the_rest_of_run_stays_unreadable_to_a_token_without_it(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    writer = await written(app, issuer, workspace)
    await app.ok(
        writer,
        "link_state",
        src=catch_up(workspace),
        rel="cites",
        dst=[f"bb://{workspace}/run/private"],
    )
    token = reader(issuer, workspace)
    private = f"bb://{workspace}/run/private"
    batch = await app.ok(token, "get_state", uris=[catch_up(workspace), private])
    listed = await app.call(token, "list_keys", topic="run")
    versions = await app.call(token, "list_keys", topic=private)
    searched = await app.ok(token, "search_keys", q="payroll")
    searched_in_run = await app.call(token, "search_keys", q="payroll", topic="run")
    linked = await app.ok(token, "get_state", uris=[catch_up(workspace)], mode="full")
    resource = await app.rpc(token, "resources/read", {"uri": private})
    topic = await app.rpc(token, "resources/read", {"uri": f"bb://{workspace}/run"})
    assert batch["items"][1] == {"uri": private, "error": "forbidden"}
    assert batch["warnings"] == ["the token may not read topic 'run'; those items are refused"]
    assert listed[0] and listed[1]["error"]["code"] == "forbidden"
    assert versions[0] and versions[1]["error"]["code"] == "forbidden"
    assert searched["items"] == []
    assert searched_in_run[0] and searched_in_run[1]["error"]["code"] == "forbidden"
    # The catch-up note's own link into run does not name the note it leads to.
    assert "run/private" not in str(linked["items"][0])
    assert resource["error"]["data"]["code"] == "forbidden"
    assert topic["error"]["data"]["code"] == "forbidden"


async def test_writing_the_catch_up_note_still_needs_write_on_run(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    planner = agent_token(issuer, workspace, sub="planner", read=READ, write=["plan"])
    is_error, body = await app.call(
        planner,
        "update_state",
        uri=catch_up(workspace),
        digest="Step 1 of 5.",
        body="",
        expect_version=0,
    )
    assert is_error and body["error"]["code"] == "forbidden"
    assert "'run'" in body["error"]["message"]


async def test_a_writer_of_run_that_reads_other_topics_is_told_the_catch_up_digest_it_lost_to(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    await written(app, issuer, workspace)
    second = agent_token(issuer, workspace, sub="second", read=READ, write=["run"])
    is_error, body = await app.call(
        second,
        "update_state",
        uri=catch_up(workspace),
        digest="Step 3 of 5.",
        body="",
        expect_version=1,
    )
    assert is_error and body["error"]["code"] == "conflict"
    assert (body["error"]["current_version"], body["error"]["current_digest"]) == (
        2,
        "Step 2 of 5.",
    )


async def test_the_catch_up_note_as_a_resource_is_offered_and_read_by_any_reader(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    await written(app, issuer, workspace)
    token = reader(issuer, workspace)
    listed = await app.rpc(token, "resources/list", {})
    read = await app.rpc(token, "resources/read", {"uri": catch_up(workspace)})
    uris = [r["uri"] for r in listed["result"]["resources"]]
    assert uris == [catch_up(workspace)]  # and no topic run: it reads neither plan nor research
    assert [c["text"] for c in read["result"]["contents"]] == ["goal: ship; step 2"]


# --- and a listen, which streams: through a gateway process -----------------------------------


async def next_uri(sub: Subscription, seconds: float = 10.0) -> str:
    with anyio.fail_after(seconds):
        event = await sub.__anext__()
    assert isinstance(event, ResourceUpdated)
    return event.uri


async def test_a_token_without_run_follows_the_catch_up_note_and_nothing_else_of_run(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    private = f"bb://{workspace}/run/private"
    token = reader(issuer, workspace)
    async with (
        mcp_client(gateway.mcp_url, agent_token(issuer, workspace, sub="lead")) as lead,
        mcp_client(gateway.mcp_url, token) as agent,
        agent.listen(resource_subscriptions=[catch_up(workspace)]) as sub,
    ):
        await call(lead, "update_state", uri=catch_up(workspace), digest="Step 1 of 5.", body="")
        assert await next_uri(sub) == catch_up(workspace)
    for other in (private, f"bb://{workspace}/run"):
        async with mcp_client(gateway.mcp_url, token) as agent:
            with pytest.raises(MCPError) as refused:
                async with agent.listen(resource_subscriptions=[other]):
                    pass
        assert refused.value.error.data["code"] == "forbidden", other
