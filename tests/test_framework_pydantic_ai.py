"""PydanticAI agents use the board through PydanticAI's own MCP client, as the README shows.

The README's "PydanticAI" entry runs as written: ``frameworks/pydantic_ai/session.py`` loads its
Python block, with this gateway's URL in place of the placeholder, and drives two agents, each
run with a scripted ``FunctionModel`` in place of the block's OpenAI model (which is never
called), in an environment of its own installed from ``frameworks/pydantic_ai/requirements.txt``.

What PydanticAI hands its model is asserted exactly, so a release that changes it fails here: a
tool error is a tool-return part whose content is the error's JSON as a string, a retry unless
``tool_error_behavior`` says otherwise.
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

NAME = "pydantic_ai"
HEADING = "PydanticAI (`MCPToolset`)"
SESSION_TIMEOUT_SECONDS = 120
TWO_AGENT_RUNS = ["b_writes", "a_writes_and_links", "b_reads_and_searches", "a_shared", "b_shared"]
TOO_LARGE = "request body over 2097152 bytes (send less per call, or use source_path for files)"


def notes(workspace: str) -> dict[str, str]:
    """The addresses session.py writes, by the names the tests use."""
    return {name: f"bb://{workspace}/notes/{name}" for name in ("findings", "plan", "shared")}


def conflict(workspace: str, note: str, digest: str) -> dict[str, Any]:
    """The gateway's conflict for a write expecting version 0 of ``note``, now at version 1."""
    return {
        "error": {
            "code": "conflict",
            "message": f"bb://{workspace}/notes/{note} already exists at version 1",
            "hint": "read the note again, merge, and retry with the current version",
            "current_version": 1,
            "current_digest": digest,
        }
    }


def success(content: dict[str, Any], tool: str) -> dict[str, Any]:
    """A successful call as the model is handed it: the structured content as the part's
    content, sent as its JSON."""
    return {
        "tool": tool,
        "outcome": "success",
        "content": content,
        "text": json.dumps(content, separators=(",", ":")),
    }


def written(version: int, digest: str) -> dict[str, Any]:
    return success({"version": version, "digest": digest, "warnings": []}, "update_state")


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
        folder=tmp_path_factory.mktemp("pydantic-ai"),
    )
    # A deprecated model name in the snippet, say, would show here.
    assert "Warning" not in done.stderr, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# ---------------------------------------------------------------- the environment


def test_the_environment_holds_the_pinned_pydantic_ai_and_the_readme_installs_that_version(
    python: Path,
) -> None:
    pins = pinned_versions(NAME)
    assert installed_versions(python, list(pins)) == pins
    [install] = re.findall(r'^    pip install "(.+)"$', readme_entry(HEADING), re.MULTILINE)
    assert install == f"pydantic-ai-slim[mcp,openai]=={pins['pydantic-ai-slim']}"


# ---------------------------------------------------------------- two agents on one board


async def test_two_agents_write_link_read_and_search_through_the_readme_toolset(
    session: dict[str, Any], gateway: GatewayProcess, issuer: TokenIssuer, board_workspace: str
) -> None:
    at = notes(board_workspace)
    findings_digest = "Cache misses double under the migration load"
    plan_digest = "Plan: move the migration to off-peak hours"
    for run in TWO_AGENT_RUNS:
        assert session[run]["output"] == "done", session[run]
    assert session["b_writes"]["received"] == [written(1, findings_digest)]
    assert session["a_writes_and_links"]["received"] == [
        written(1, plan_digest),
        success(
            {"src": at["plan"], "rel": "derived_from", "linked": [at["findings"]], "warnings": []},
            "link_state",
        ),
    ]

    read, found = session["b_reads_and_searches"]["received"]
    assert (read["tool"], read["outcome"], found["tool"], found["outcome"]) == (
        "get_state", "success", "search_keys", "success",
    )  # fmt: skip
    [item] = read["content"]["items"]
    assert (item["uri"], item["author"], item["version"]) == (at["plan"], "agent-a", 1)
    assert item["body"] == plan_digest
    assert item["links"] == [{"rel": "derived_from", "to": at["findings"]}]
    assert {i["uri"]: i["digest"] for i in found["content"]["items"]} == {
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


def test_a_conflict_reaches_the_model_as_a_failed_result_holding_the_error_json_as_a_string(
    session: dict[str, Any], board_workspace: str
) -> None:
    handed = [r for run in TWO_AGENT_RUNS for r in session[run]["received"]]
    failed = [r for r in handed if r["outcome"] != "success"]
    assert len(failed) == 1, failed
    assert session["a_shared"]["received"] == [written(1, "A: ship on Tuesday")]
    stale, merged = session["b_shared"]["received"]
    assert stale == failed[0]
    # The part's content is the error's JSON as one string, and the text a provider without
    # a tool-error field (OpenAI's) is sent wraps that string again: double-encoded.
    assert stale["tool"] == "update_state"
    assert stale["outcome"] == "failed"
    assert isinstance(stale["content"], str)
    assert json.loads(stale["content"]) == conflict(board_workspace, "shared", "A: ship on Tuesday")
    assert json.loads(stale["text"]) == {"error": stale["content"]}
    # The model read the current version off it and wrote again.
    assert merged == written(2, "B: ship on Thursday, after A's Tuesday dry run")


def test_the_readme_setting_keeps_a_run_going_past_a_second_conflict_where_the_default_ends_it(
    session: dict[str, Any], board_workspace: str
) -> None:
    assert session["snippet_tool_error_behavior"] == "failed"
    expected = conflict(board_workspace, "contested", "B's first take")

    kept_going = session["two_conflicts"]
    assert kept_going["output"] == "done"
    assert [r["outcome"] for r in kept_going["received"]] == ["failed", "failed"]
    assert all(json.loads(r["content"]) == expected for r in kept_going["received"])

    # Left at "retry", the first conflict is a retry and the second one too many.
    ended = session["two_conflicts_by_default"]
    [retried] = ended["received"]
    assert retried["outcome"] == "retried"
    assert json.loads(retried["content"]) == expected
    assert json.loads(retried["text"]) == {"error": retried["content"]}
    assert ended["error"]["type"] == "UnexpectedModelBehavior"
    assert ended["error"]["message"].startswith(
        "Tool 'update_state' exceeded max retries count of 1."
    )


# ---------------------------------------------------------------- what the model is given


async def test_the_model_is_given_every_tool_schema_unchanged_and_openai_would_not_be_strict(
    session: dict[str, Any], gateway: GatewayProcess, issuer: TokenIssuer, board_workspace: str
) -> None:
    token = agent_token(issuer, board_workspace, sub="reader")
    async with mcp_client(gateway.mcp_url, token) as client:
        served = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
    assert len(served) == 5
    offered = {t["name"]: t for t in session["tools"]}
    assert {name: t["parameters"] for name, t in offered.items()} == served
    assert {t["strict"] for t in offered.values()} == {None}
    # The snippet's OpenAI model decides strictness itself when none is set, and finds no
    # tool of the board fit for it (each has optional arguments), as "The five tools" needs.
    for_openai = {t["name"]: t for t in session["tools_for_openai"]}
    assert set(for_openai) == set(served)
    assert {t["strict"] for t in for_openai.values()} == {False}
    for name, tool in for_openai.items():
        assert tool["parameters"] == {**served[name], "additionalProperties": False}


# ---------------------------------------------------------------- refusals


def test_a_refused_token_stops_the_run_with_the_gateway_message(session: dict[str, Any]) -> None:
    assert session["wrong_token"] == {
        "raised": "mcp.shared.exceptions.MCPError",
        "message": "the token is not a JWT "
        "(ask the board's admin or your identity provider for a valid token)",
    }


async def test_an_oversized_write_reaches_the_model_as_a_retry_with_the_gateway_message(
    session: dict[str, Any], gateway: GatewayProcess, issuer: TokenIssuer, board_workspace: str
) -> None:
    # A refusal before MCP is a protocol error, always a retry whatever tool_error_behavior says.
    assert session["too_large"] == {
        "received": [
            {
                "tool": "update_state",
                "outcome": "retried",
                "content": TOO_LARGE,
                "text": json.dumps({"error": TOO_LARGE}, separators=(",", ":")),
            }
        ],
        "output": "done",
    }
    huge = f"bb://{board_workspace}/notes/huge"
    token = agent_token(issuer, board_workspace, sub="reader")
    async with mcp_client(gateway.mcp_url, token) as client:
        _, body = await call(client, "get_state", uris=[huge])
    assert body["items"] == [{"uri": huge, "error": "not_found"}]
