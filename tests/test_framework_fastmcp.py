"""Two agents use the board through FastMCP's client, as the README shows.

The README's "FastMCP client" entry runs as written: ``frameworks/fastmcp/session.py`` loads
its Python block, with this gateway's URL in place of the placeholder, once per agent with its
own token, and calls the tools through its ``board`` and ``use_board`` in a fixed order, in an
environment of its own installed from ``frameworks/fastmcp/requirements.txt``. FastMCP's
client has no model: what ``use_board`` returns is what an agent would hand its model.

What FastMCP gives for a tool error is asserted exactly, so a release that changes it fails
here: by default ``call_tool`` raises ``ToolError`` holding the error's text; with
``raise_on_error=False`` it returns the result, ``is_error`` set and the error in
``structured_content``.
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

NAME = "fastmcp"
HEADING = "FastMCP client"
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
    """One run of session.py: what each agent was handed, and the refusals."""
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
        folder=tmp_path_factory.mktemp("fastmcp"),
    )
    [line] = done.stdout.splitlines()
    result: dict[str, Any] = json.loads(line)
    return result


def handed(session: dict[str, Any], agent: str, tool: str) -> list[dict[str, Any]]:
    """What ``use_board`` returned to ``agent`` for each of its calls of ``tool``, in order."""
    return [c["result"] for c in session["handed"][agent] if c["tool"] == tool]


def race(session: dict[str, Any]) -> tuple[str, str]:
    """(winner, loser) of the two writes over version 1 of the plan: each agent's last write."""
    last = {agent: handed(session, agent, "update_state")[-1] for agent in ("a", "b")}
    [loser] = [agent for agent, result in last.items() if "error" in result]
    winner = "b" if loser == "a" else "a"
    assert last[winner]["version"] == 2, last
    return winner, loser


def assert_conflict(error: dict[str, Any], winner: str) -> None:
    assert set(error) == {"code", "message", "hint", "current_version", "current_digest"}
    assert error["code"] == "conflict"
    assert (error["current_version"], error["current_digest"]) == (2, REVISED[winner]["digest"])


# ---------------------------------------------------------------- the environment


def test_the_environment_holds_the_pinned_version_the_readme_installs(python: Path) -> None:
    pins = pinned_versions(NAME)
    assert installed_versions(python, list(pins)) == pins
    [install] = command_lines(readme_entry(HEADING), "pip install")
    assert shlex.split(install)[2:] == [f"fastmcp=={pins['fastmcp']}"]
    # The README says FastMCP 4.2 runs on the server's own mcp 2.3.
    assert pins["mcp"].startswith("2.3.")


# ---------------------------------------------------------------- two agents


def test_both_clients_list_the_five_tools(session: dict[str, Any]) -> None:
    assert session["listed"] == {"a": FIVE_TOOLS, "b": FIVE_TOOLS}


def test_the_agents_are_handed_the_writes_the_link_the_read_and_the_search(
    session: dict[str, Any], board_workspace: str
) -> None:
    plan = f"bb://{board_workspace}/notes/plan"
    finding = f"bb://{board_workspace}/notes/finding"
    recorded = handed(session, "b", "update_state")[0]
    assert recorded == {
        "version": 1,
        "digest": "Cache misses come from the nightly import",
        "warnings": [],
    }
    assert handed(session, "a", "update_state")[0]["version"] == 1
    [linked] = handed(session, "a", "link_state")
    assert linked == {"src": plan, "rel": "derived_from", "linked": [finding], "warnings": []}

    [read] = handed(session, "b", "get_state")
    [item] = read["items"]
    assert (item["uri"], item["version"], item["author"]) == (plan, 1, "agent-a")
    assert item["body"] == "Move the import to 03:00, then roll out in stages."
    assert item["links"] == [{"rel": "derived_from", "to": finding}]
    [searched] = handed(session, "b", "search_keys")
    assert [(f["uri"], f["digest"]) for f in searched["items"]] == [(plan, "Staged rollout plan")]


def test_with_raise_on_error_off_a_conflict_is_handed_back_with_the_current_version(
    session: dict[str, Any],
) -> None:
    winner, loser = race(session)
    lost = handed(session, loser, "update_state")[-1]
    # The result's structured content, as for any other call: only its `error` key tells.
    assert set(lost) == {"error"}
    assert_conflict(lost["error"], winner)
    every_result = session["handed"]["a"] + session["handed"]["b"]
    assert ["error" in c["result"] for c in every_result].count(True) == 1

    # The same stale write again, the whole CallToolResult: is_error set, no parsed `data`,
    # and the text part the same error as JSON.
    result = session["stale_write"]["raise_on_error=False"]
    assert (result["is_error"], result["data"]) == (True, None)
    assert_conflict(result["structured_content"]["error"], winner)
    [text] = result["content"]
    assert text["type"] == "text"
    assert json.loads(text["text"]) == result["structured_content"]


def test_call_tool_by_default_raises_a_tool_error_holding_the_conflict_as_json_text(
    session: dict[str, Any],
) -> None:
    winner, _ = race(session)
    raised = session["stale_write"]["call_tool"]
    assert raised is not None, "call_tool raised nothing for a stale write"
    assert raised["type"] == "fastmcp.exceptions.ToolError"
    assert_conflict(json.loads(raised["message"])["error"], winner)


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
    # The stale writes after the race and the refused body changed nothing.
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


def test_a_refused_token_raises_mcp_error_with_the_gateways_reason(
    session: dict[str, Any],
) -> None:
    refused = session["refused"]["token"]
    assert refused is not None, "connecting with a wrong token raised nothing"
    assert refused["type"] == "mcp.shared.exceptions.MCPError"
    assert refused["message"].startswith("the token is not a JWT (")


def test_a_refused_body_raises_mcp_error_with_the_gateways_reason(
    session: dict[str, Any],
) -> None:
    refused = session["refused"]["body"]
    assert refused is not None, "a body over the limit raised nothing"
    assert refused["type"] == "mcp.shared.exceptions.MCPError"
    assert refused["message"].startswith("request body over 2097152 bytes (")
