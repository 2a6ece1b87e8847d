"""Notes as MCP resources, through the SDK's client against the real gateway app."""

from __future__ import annotations

import pytest
from app_support import InProcessGateway
from mcp.shared.exceptions import MCPError
from support import agent_token, call

from blackboard_mcp.auth import TokenIssuer


def addr(ws: str, rest: str) -> str:
    return f"bb://{ws}/{rest}"


async def test_the_note_template_is_offered(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["bb://{workspace}/{topic}/{+key}"]


async def test_reading_a_note_gives_its_whole_content(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    big = "".join(f"line {i} of a long finding\n" for i in range(2000))  # offloaded (>10 KB)
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        await call(
            client, "update_state", uri=addr(workspace, "facts/a"), digest="A.", body="hello"
        )
        await call(client, "update_state", uri=addr(workspace, "facts/big"), digest="B.", body=big)
        await call(
            client,
            "update_state",
            uri=addr(workspace, "facts/t"),
            digest="T.",
            columns=["name", "n"],
            rows=[["x", 1], ["y", 2]],
        )
        text = (await client.read_resource(addr(workspace, "facts/a"))).contents[0]
        whole = (await client.read_resource(addr(workspace, "facts/big"))).contents[0]
        table = (await client.read_resource(addr(workspace, "facts/t"))).contents[0]
    assert (text.uri, text.mime_type, getattr(text, "text", None)) == (
        addr(workspace, "facts/a"),
        "text/plain",
        "hello",
    )
    assert getattr(whole, "text", None) == big
    assert table.mime_type == "text/tab-separated-values"
    assert getattr(table, "text", "").splitlines() == ["name\tn", "x\t1", "y\t2"]


async def test_an_unreadable_topic_is_refused_as_get_state_refuses_it(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as writer:
        await call(writer, "update_state", uri=addr(workspace, "secret/x"), digest="S.", body="s")
    reader = agent_token(issuer, workspace, read=["facts"], write=[], caps=["board_read"])
    async with app_gateway.mcp_client(reader) as client:
        is_error, body = await call(client, "get_state", uris=[addr(workspace, "secret/x")])
        with pytest.raises(MCPError) as refused:
            await client.read_resource(addr(workspace, "secret/x"))
        with pytest.raises(MCPError) as missing:
            await client.read_resource(addr(workspace, "facts/none"))
        with pytest.raises(MCPError) as foreign:
            await client.read_resource("bb://other-ws/facts/x")
    # A tool call's batch refuses the item; a resource is the one note, and is refused whole.
    assert not is_error and body["items"] == [
        {"uri": addr(workspace, "secret/x"), "error": "forbidden"}
    ]
    assert refused.value.error.data["code"] == "forbidden"
    assert "'secret'" in refused.value.error.data["message"]
    assert "s" not in refused.value.error.message.split()
    assert missing.value.error.data["code"] == "not_found"
    assert foreign.value.error.data["code"] == "forbidden"


async def test_the_list_offers_the_catch_up_note_and_readable_topics_only(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as writer:
        for rest in ("facts/a", "facts/b", "secret/x", "run/state/current"):
            await call(writer, "update_state", uri=addr(workspace, rest), digest="D.", body="b")
    reader = agent_token(issuer, workspace, read=["facts", "run"], write=[], caps=["board_read"])
    async with app_gateway.mcp_client(reader) as client:
        listed = (await client.list_resources()).resources
        topic = (await client.read_resource(addr(workspace, "facts"))).contents[0]
    assert [(r.uri, r.description) for r in listed] == [
        (addr(workspace, "run/state/current"), "Read this first."),
        (addr(workspace, "facts"), "2 notes; subscribe for changes to any of them"),
        (addr(workspace, "run"), "1 note; subscribe for changes to any of them"),
    ]
    assert addr(workspace, "facts/a") in getattr(topic, "text", "")
    assert "secret" not in getattr(topic, "text", "")


async def test_another_workspaces_topic_address_is_refused_not_answered_with_ones_own(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    async with app_gateway.mcp_client(token) as client:
        await call(client, "update_state", uri=addr(workspace, "pub/n"), digest="Mine.", body="m")
        with pytest.raises(MCPError) as foreign:
            await client.read_resource("bb://other-ws/pub")
        own = (await client.read_resource(addr(workspace, "pub"))).contents[0]
    assert foreign.value.error.data["code"] == "forbidden"
    assert "other-ws" in foreign.value.error.data["message"]
    assert "Mine." not in str(foreign.value.error)
    assert "Mine." in own.text


async def test_the_list_offers_only_what_can_be_read(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    async with app_gateway.mcp_client(token) as client:
        # A fresh board has no catch-up note yet: it is not offered (its template is).
        assert (await client.list_resources()).resources == []
        await call(client, "update_state", uri=addr(workspace, "facts/a"), digest="D.", body="b")
        listed = (await client.list_resources()).resources
        assert [r.uri for r in listed] == [addr(workspace, "facts")]
        for resource in listed:
            assert (await client.read_resource(resource.uri)).contents
        await call(
            client, "update_state", uri=addr(workspace, "run/state/current"), digest="D.", body="b"
        )
        listed = (await client.list_resources()).resources
        assert listed[0].uri == addr(workspace, "run/state/current")
        for resource in listed:
            assert (await client.read_resource(resource.uri)).contents


async def test_a_missing_note_is_not_found_as_2026_07_28_says_with_its_uri(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    missing = addr(workspace, "facts/none")
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource(missing)
    # The 2026-07-28 protocol answers an unknown resource as invalid params (-32602), and
    # names it in the error's data.
    assert refused.value.error.code == -32602
    assert refused.value.error.data["uri"] == missing
    assert refused.value.error.data["code"] == "not_found"
