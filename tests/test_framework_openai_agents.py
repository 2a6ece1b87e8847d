"""OpenAI Agents SDK agents use the board through the SDK's own MCP client, as the README shows.

The README's "OpenAI Agents SDK" entry runs as written: ``frameworks/openai_agents/session.py``
loads its Python block, with this gateway's URL in place of the placeholder, and drives two
agents, each run with the SDK's own ``agents.testing.ScriptedModel`` in place of the block's
model (nothing is sent to OpenAI), in an environment of its own installed from
``frameworks/openai_agents/requirements.txt``.

What the SDK hands its model is asserted exactly, so a release that changes it fails here: a
tool result is the MCP result's text and nothing else, so a conflict is an ordinary output
whose text is the error's JSON, with no ``isError``.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import GatewayProcess, agent_token, call, mcp_client
from test_client_setups import readme_entry
from venv_support import framework_python, installed_versions, pinned_versions, run_readme_session

from blackboard_mcp.auth import TokenIssuer

NAME = "openai_agents"
HEADING = "OpenAI Agents SDK (`MCPServerStreamableHttp`)"
SESSION_TIMEOUT_SECONDS = 120
TWO_AGENT_RUNS = ["b_writes", "a_writes_and_links", "b_reads_and_searches", "a_shared", "b_shared"]
TOO_LARGE = "request body over 2097152 bytes (send less per call, or use source_path for files)"
GATEWAY_SAYS = (
    "the token is not a JWT (ask the board's admin or your identity provider for a valid token)"
)


def notes(workspace: str) -> dict[str, str]:
    """The addresses session.py writes, by the names the tests use."""
    return {name: f"bb://{workspace}/notes/{name}" for name in ("findings", "plan", "shared")}


def output(tool: str, text: str) -> dict[str, Any]:
    """A tool result as the SDK hands it to the model: the MCP result's one text part."""
    return {
        "tool": tool,
        "output": [{"type": "input_text", "text": text}],
        "type": "function_call_output",
    }


def content(handed: dict[str, Any]) -> Any:
    """What the model reads in a tool result's text."""
    [part] = handed["output"]
    return json.loads(part["text"])


def written(version: int, digest: str) -> dict[str, Any]:
    result = {"version": version, "digest": digest, "warnings": []}
    return output("update_state", json.dumps(result, separators=(",", ":")))


@pytest.fixture(scope="module")
def python() -> Path:
    return framework_python(NAME)


@pytest.fixture(scope="module")
def board_workspace() -> str:
    return "ws-" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="module")
def session(
    python: Path,
    gateway: GatewayProcess,
    issuer: TokenIssuer,
    board_workspace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """One run of session.py: what each run's model was handed, and the refusals."""
    tokens = {
        "BB_TOKEN_A": agent_token(issuer, board_workspace, sub="agent-a"),
        "BB_TOKEN_B": agent_token(issuer, board_workspace, sub="agent-b"),
    }
    done = run_readme_session(
        python,
        NAME,
        heading=HEADING,
        gateway=gateway,
        workspace=board_workspace,
        tokens=tokens,
        folder=tmp_path_factory.mktemp("openai-agents"),
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# ---------------------------------------------------------------- the environment


def test_the_environment_holds_the_pinned_sdk_and_the_readme_installs_that_version(
    python: Path,
) -> None:
    pins = pinned_versions(NAME)
    assert installed_versions(python, list(pins)) == pins
    [install] = re.findall(r'^    pip install "(.+)"$', readme_entry(HEADING), re.MULTILINE)
    assert install == f"openai-agents=={pins['openai-agents']}"


# ---------------------------------------------------------------- two agents on one board


async def test_two_agents_write_link_read_and_search_through_the_readme_server(
    session: dict[str, Any], gateway: GatewayProcess, issuer: TokenIssuer, board_workspace: str
) -> None:
    at = notes(board_workspace)
    findings_digest = "Cache misses double under the migration load"
    plan_digest = "Plan: move the migration to off-peak hours"
    for run in TWO_AGENT_RUNS:
        assert session[run]["output"] == "done", session[run]
    assert session["b_writes"]["received"] == [written(1, findings_digest)]
    wrote, linked = session["a_writes_and_links"]["received"]
    assert wrote == written(1, plan_digest)
    assert linked["tool"] == "link_state"
    assert content(linked) == {
        "src": at["plan"],
        "rel": "derived_from",
        "linked": [at["findings"]],
        "warnings": [],
    }

    read, found = session["b_reads_and_searches"]["received"]
    assert (read["tool"], found["tool"]) == ("get_state", "search_keys")
    [item] = content(read)["items"]
    assert (item["uri"], item["author"], item["version"]) == (at["plan"], "agent-a", 1)
    assert item["body"] == plan_digest
    assert item["links"] == [{"rel": "derived_from", "to": at["findings"]}]
    assert {i["uri"]: i["digest"] for i in content(found)["items"]} == {
        at["findings"]: findings_digest,
        at["plan"]: plan_digest,
    }

    # The board holds what the agents wrote, B's merge of the shared note at version 2.
    token = agent_token(issuer, board_workspace, sub="reader")
    async with mcp_client(gateway.mcp_url, token) as client:
        is_error, body = await call(client, "get_state", uris=list(at.values()), mode="full")
    assert not is_error, body
    board = {i["uri"]: (i["author"], i["version"], i["digest"]) for i in body["items"]}
    assert board == {
        at["findings"]: ("agent-b", 1, findings_digest),
        at["plan"]: ("agent-a", 1, plan_digest),
        at["shared"]: ("agent-b", 2, "B: ship on Thursday, after A's Tuesday dry run"),
    }


def test_a_conflict_reaches_the_model_as_an_ordinary_output_with_an_error_key(
    session: dict[str, Any], board_workspace: str
) -> None:
    handed = [r for run in TWO_AGENT_RUNS for r in session[run]["received"]]
    errors = [r for r in handed if "error" in content(r)]
    assert len(errors) == 1, errors
    assert session["a_shared"]["received"] == [written(1, "A: ship on Tuesday")]
    stale, merged = session["b_shared"]["received"]
    # No isError, no error status: the same shape as a success, the error JSON as its text.
    assert stale == output(
        "update_state",
        json.dumps(
            {
                "error": {
                    "code": "conflict",
                    "message": f"{notes(board_workspace)['shared']} already exists at version 1",
                    "hint": "read the note again, merge, and retry with the current version",
                    "current_version": 1,
                    "current_digest": "A: ship on Tuesday",
                }
            },
            separators=(",", ":"),
        ),
    )
    # The model read the current version off it and wrote again.
    assert merged == written(2, "B: ship on Thursday, after A's Tuesday dry run")


# ---------------------------------------------------------------- what the model is given


async def test_the_model_is_given_every_tool_schema_unchanged_and_not_strict(
    session: dict[str, Any], gateway: GatewayProcess, issuer: TokenIssuer, board_workspace: str
) -> None:
    token = agent_token(issuer, board_workspace, sub="reader")
    async with mcp_client(gateway.mcp_url, token) as client:
        served = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
    assert len(served) == 5
    # The snippet states the SDK's default.
    assert session["mcp_config"] == {"convert_schemas_to_strict": False}
    assert session["default_mcp_config"] == {}
    offered = {t["name"]: t for t in session["tools"]}
    assert {name: t["parameters"] for name, t in offered.items()} == served
    assert {t["strict"] for t in offered.values()} == {False}


def test_strict_conversion_would_make_the_model_send_every_argument(
    session: dict[str, Any],
) -> None:
    # The SDK converts the board's schemas without complaint, so nothing warns that each
    # optional argument became required: update_state's exclusive alternatives all at once.
    strict = {t["name"]: t for t in session["tools_when_strict"]}
    assert {t["strict"] for t in strict.values()} == {True}
    for tool in strict.values():
        schema = tool["parameters"]
        assert schema["additionalProperties"] is False
        assert schema["required"] == list(schema["properties"])
    required = strict["update_state"]["parameters"]["required"]
    assert {"body", "source_path", "columns", "rows", "append"} <= set(required)


# ---------------------------------------------------------------- refusals


def test_a_refused_token_fails_the_connection_with_the_gateway_message_inside_a_group(
    session: dict[str, Any],
) -> None:
    refused = session["wrong_token"]
    # The SDK's connect fails inside anyio task groups, so the error is a group; its one
    # leaf is the MCPError with the gateway's own message, and the traceback shows it.
    assert refused["raised"] == "builtins.ExceptionGroup"
    assert refused["message"] == "unhandled errors in a TaskGroup (1 sub-exception)"
    assert refused["leaves"] == [f"mcp.shared.exceptions.MCPError: {GATEWAY_SAYS}"]
    assert f"mcp.shared.exceptions.MCPError: {GATEWAY_SAYS}\n" in refused["printed"]
    assert "Server returned an error response" not in refused["printed"]


async def test_an_oversized_write_reaches_the_model_with_the_gateway_message_through_the_setting(
    session: dict[str, Any], gateway: GatewayProcess, issuer: TokenIssuer, board_workspace: str
) -> None:
    huge_output = {"tool": "update_state", "type": "function_call_output"}
    assert session["too_large"] == {
        "received": [{**huge_output, "output": TOO_LARGE}],
        "output": "done",
        "logged": ["MCP tool returned an error."],
    }
    # Without the snippet's failure_error_function, neither the model nor the person sees why.
    assert session["too_large_by_default"] == {
        "received": [
            {**huge_output, "output": "An error occurred while running the tool. Please try again."}
        ],
        "logged": ["MCP tool returned an error."],
    }
    huge = f"bb://{board_workspace}/notes/huge"
    token = agent_token(issuer, board_workspace, sub="reader")
    async with mcp_client(gateway.mcp_url, token) as client:
        _, body = await call(client, "get_state", uris=[huge])
    assert body["items"] == [{"uri": huge, "error": "not_found"}]
