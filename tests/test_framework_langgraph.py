"""LangGraph agents use the board through LangChain's MCP adapters, as the README shows.

The README's "LangGraph" entry runs as written: ``frameworks/langgraph/session.py`` loads its
Python block, with this gateway's URL in place of the placeholder, and builds two agents with
its ``board_agent``, each driven by a scripted chat model (no model service), in an
environment of its own installed from ``frameworks/langgraph/requirements.txt``: the adapters
0.3.2 still speak mcp 1.x, not the 2.x the server is built on.

What the adapters hand the model is asserted exactly, so a release that changes it fails here:
a tool result is a ToolMessage holding the result's text blocks; a tool error is the same with
``status="error"``, its JSON once encoded, and the structured content is not passed on.
"""

from __future__ import annotations

import json
import shlex
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import GatewayProcess, agent_token, call, mcp_client
from test_client_setups import command_lines, readme_entry
from venv_support import framework_python, installed_versions, pinned_versions, run_readme_session

from blackboard_mcp.auth import TokenIssuer

NAME = "langgraph"
HEADING = "LangGraph (LangChain's MCP adapters)"
SESSION_TIMEOUT_SECONDS = 120
FIVE_TOOLS = sorted(["update_state", "get_state", "list_keys", "search_keys", "link_state"])
# What session.py's agents write over version 1 of the plan (its REVISED).
REVISED = {
    "a": {"digest": "Plan, revised by A", "body": "Move the import to 02:00."},
    "b": {"digest": "Plan, revised by B", "body": "Move the import to 04:00."},
}


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
    """One run of session.py: what each agent's model was handed, and the refusals."""
    tokens = {
        f"BB_TOKEN_{name.upper()}": agent_token(
            issuer, board_workspace, sub=f"agent-{name}", write=["notes"]
        )
        for name in ("a", "b")
    }
    done = run_readme_session(
        python,
        NAME,
        heading=HEADING,
        gateway=gateway,
        workspace=board_workspace,
        tokens=tokens,
        folder=tmp_path_factory.mktemp("langgraph"),
    )
    [line] = done.stdout.splitlines()
    result: dict[str, Any] = json.loads(line)
    return result


def handed(session: dict[str, Any], agent: str, prompt: str) -> list[dict[str, Any]]:
    """The tool messages ``agent``'s model was handed while it answered ``prompt``."""
    return [m for m in session["received"][agent] if m["prompt"] == prompt]


def text_of(message: dict[str, Any]) -> Any:
    """The JSON in a tool message: one text block, as the adapters convert MCP text content."""
    [block] = message["content"]
    assert set(block) == {"type", "text", "id"}, block
    assert block["type"] == "text"
    return json.loads(block["text"])


def race(session: dict[str, Any]) -> tuple[str, str]:
    """(winner, loser) of the two writes over version 1 of the plan."""
    statuses = {
        agent: [m["status"] for m in handed(session, agent, "revise the plan")]
        for agent in ("a", "b")
    }
    assert sorted(statuses.values()) == [["error"], ["success"]], statuses
    winner = next(agent for agent, status in statuses.items() if status == ["success"])
    return winner, "b" if winner == "a" else "a"


# ---------------------------------------------------------------- the environment


def test_the_environment_holds_the_pinned_versions_the_readme_installs(python: Path) -> None:
    pins = pinned_versions(NAME)
    assert installed_versions(python, list(pins)) == pins
    [install] = command_lines(readme_entry(HEADING), "pip install")
    readme_pins = dict(word.split("==") for word in shlex.split(install)[2:])
    assert readme_pins == {
        name: pins[name] for name in ("langchain-mcp-adapters", "langgraph", "langchain")
    }
    # The adapters' own client: the README's note on mcp 1.x holds while this does.
    assert pins["mcp"].startswith("1.")


# ---------------------------------------------------------------- two agents


def test_both_models_are_handed_the_five_tools(session: dict[str, Any]) -> None:
    assert session["bound"] == {"a": FIVE_TOOLS, "b": FIVE_TOOLS}


def test_the_models_see_the_writes_the_link_the_read_and_the_search(
    session: dict[str, Any], board_workspace: str
) -> None:
    plan = f"bb://{board_workspace}/notes/plan"
    finding = f"bb://{board_workspace}/notes/finding"
    [recorded] = handed(session, "b", "record the finding")
    assert recorded["tool"] == "update_state" and recorded["status"] == "success"
    assert text_of(recorded)["version"] == 1
    written, linked = handed(session, "a", "write the plan")
    assert (written["tool"], written["status"]) == ("update_state", "success")
    assert text_of(written)["version"] == 1
    assert (linked["tool"], linked["status"]) == ("link_state", "success")
    assert text_of(linked)["linked"] == [finding]

    # B's two calls of one turn come back in the order it made them.
    read, searched = handed(session, "b", "catch up")
    assert (read["tool"], searched["tool"]) == ("get_state", "search_keys")
    [item] = text_of(read)["items"]
    assert (item["uri"], item["version"], item["author"]) == (plan, 1, "agent-a")
    assert item["body"] == "Move the import to 03:00, then roll out in stages."
    assert item["links"] == [{"rel": "derived_from", "to": finding}]
    found = text_of(searched)["items"]
    assert [(f["uri"], f["digest"]) for f in found] == [(plan, "Staged rollout plan")]


def test_a_conflict_reaches_the_model_as_an_error_tool_message_with_the_current_version(
    session: dict[str, Any],
) -> None:
    winner, loser = race(session)
    [won] = handed(session, winner, "revise the plan")
    assert text_of(won)["version"] == 2
    [lost] = handed(session, loser, "revise the plan")
    # The adapters' handle_tool_errors (on by default): the run goes on, and the model gets
    # the error's text part, the board's JSON encoded once, marked as a failed tool call.
    assert lost["tool"] == "update_state" and lost["status"] == "error"
    error = text_of(lost)["error"]
    assert set(error) == {"code", "message", "hint", "current_version", "current_digest"}
    assert error["code"] == "conflict"
    assert error["current_version"] == 2
    assert error["current_digest"] == REVISED[winner]["digest"]
    every_call = session["received"]["a"] + session["received"]["b"]
    assert [m["status"] for m in every_call].count("error") == 1


async def test_the_board_holds_what_the_agents_wrote(
    session: dict[str, Any], gateway: GatewayProcess, issuer: TokenIssuer, board_workspace: str
) -> None:
    winner, _ = race(session)
    plan = f"bb://{board_workspace}/notes/plan"
    finding = f"bb://{board_workspace}/notes/finding"
    async with mcp_client(gateway.mcp_url, agent_token(issuer, board_workspace)) as client:
        is_error, body = await call(client, "get_state", uris=[plan, finding], mode="full")
    assert not is_error, body
    by_uri = {item["uri"]: item for item in body["items"]}
    assert by_uri[plan]["version"] == 2
    assert by_uri[plan]["author"] == f"agent-{winner}"
    assert (by_uri[plan]["digest"], by_uri[plan]["body"]) == (
        REVISED[winner]["digest"],
        REVISED[winner]["body"],
    )
    assert by_uri[plan]["links"] == [{"rel": "derived_from", "to": finding}]
    assert (by_uri[finding]["version"], by_uri[finding]["author"]) == (1, "agent-b")
    assert by_uri[finding]["body"] == "The nightly import evicts the hot keys."


# ---------------------------------------------------------------- refusals


def refusal_seen(seen: dict[str, Any] | None) -> str:
    """The one error inside what a refusal raised: mcp 1.x raises it in an exception group."""
    assert seen is not None, "the refused call raised nothing"
    assert seen["type"] == "builtins.ExceptionGroup", seen
    [inner] = seen["inner"]
    assert inner["type"] == "httpx.HTTPStatusError", seen
    return str(inner["message"])


def test_a_refused_token_shows_the_gateways_reason_through_the_snippets_hook(
    session: dict[str, Any],
) -> None:
    message = refusal_seen(session["refused"]["token"])
    status, _, body = message.partition(": ")
    assert status == "401"
    assert json.loads(body)["error"]["message"].startswith("the token is not a JWT")


def test_a_refused_body_shows_the_gateways_reason_through_the_snippets_hook(
    session: dict[str, Any],
) -> None:
    message = refusal_seen(session["refused"]["body"])
    status, _, body = message.partition(": ")
    assert status == "413"
    assert json.loads(body)["error"]["message"].startswith("request body over 2097152 bytes")


def test_without_the_hook_the_adapters_show_only_the_http_status(
    session: dict[str, Any], gateway: GatewayProcess
) -> None:
    # mcp 1.x raises httpx's own error before it reads the answer: the README's reason for
    # the hook.
    message = refusal_seen(session["refused"]["token without the hook"])
    assert message.startswith(f"Client error '401 Unauthorized' for url '{gateway.mcp_url}'")
    assert "JWT" not in message


# ---------------------------------------------------------------- strict mode


def test_strict_conversion_makes_every_update_state_argument_required(
    session: dict[str, Any],
) -> None:
    # Why the README says to leave strict off: LangChain's OpenAI conversion with strict=True
    # requires every property, and update_state takes exactly one content argument.
    required = session["update_state_required"]
    assert required["default"] == ["uri", "digest"]
    assert set(required["strict"]) == {
        "uri", "digest", "body", "source_path", "columns", "rows", "append",
        "expect_version", "sources", "confidence",
    }  # fmt: skip
