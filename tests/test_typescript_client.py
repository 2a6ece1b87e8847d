"""A client nobody here wrote: the TypeScript MCP SDK drives all five tools through the gateway.

``ts_client/client.mjs`` makes the calls and prints what it saw as one JSON object; every
assertion is here, on that JSON. The script runs once per module and each test checks one
behaviour of that run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from npm_support import locked_versions, npm_ci
from support import GatewayProcess, agent_token

from blackboard_mcp import __version__
from blackboard_mcp.auth import TokenIssuer

pytestmark = pytest.mark.node

CLIENT_DIR = Path(__file__).parent / "ts_client"
SDK_PACKAGE = "@modelcontextprotocol/sdk"
# npm ci takes 10-15 s from a cold cache; the margin is for slow CI mirrors, not for retries.
NPM_CI_TIMEOUT_SECONDS = 300
CLIENT_TIMEOUT_SECONDS = 120

FIVE_TOOLS = ["update_state", "get_state", "list_keys", "search_keys", "link_state"]


@pytest.fixture(scope="session")
def node() -> str:
    """The node binary, with the client's packages installed from the committed lockfile."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        # CI installs them (.ci/run): there a missing node is a broken build, not a skip.
        if os.environ.get("CI") == "true":
            pytest.fail("node and npm are not on PATH; CI must run the TypeScript MCP client")
        pytest.skip("node and npm are needed on PATH to run the TypeScript MCP client")
    npm_ci(npm, CLIENT_DIR, NPM_CI_TIMEOUT_SECONDS)
    return node


@dataclass(frozen=True)
class Run:
    """One run of client.mjs: the workspace it wrote to and what it printed."""

    workspace: str
    out: dict[str, Any]
    direct_calls: float  # how many of its calls the gateway answered on its direct path

    def note(self, name: str) -> str:
        return str(self.out["uris"][name])

    def result(self, step: str) -> dict[str, Any]:
        """The structured content of ``step``, after checking its text block says the same."""
        observed = self.out[step]
        # Clients without structured output show the model only the text block.
        assert observed["contentTypes"] == ["text"], observed
        assert observed["textJson"] == observed["structured"], observed
        body = observed["structured"]
        assert isinstance(body, dict), observed
        return body

    def is_error(self, step: str) -> bool:
        return bool(self.out[step]["isError"])


@pytest.fixture(scope="module")
def run(node: str, gateway: GatewayProcess, issuer: TokenIssuer) -> Run:
    # The function-scoped `workspace` fixture cannot feed a module-scoped run.
    workspace = "ws-" + uuid.uuid4().hex[:12]
    direct_before = direct_calls(gateway)
    completed = subprocess.run(
        [node, "client.mjs", gateway.mcp_url, workspace],
        cwd=CLIENT_DIR,
        env={**os.environ, "BB_TOKEN": agent_token(issuer, workspace)},
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_SECONDS,
        check=False,
    )
    report = (
        f"exit {completed.returncode}\nstdout: {completed.stdout}\nstderr: {completed.stderr}\n"
        f"gateway log tail: {gateway.log_text()[-3000:]}"
    )
    assert completed.returncode == 0, report
    out = json.loads(completed.stdout)
    assert isinstance(out, dict), report
    return Run(workspace, out, direct_calls(gateway) - direct_before)


def direct_calls(gateway: GatewayProcess) -> float:
    metrics = httpx.get(gateway.url + "/metrics", timeout=5.0).text
    [line] = [m for m in metrics.splitlines() if m.startswith("bb_direct_tool_calls_total ")]
    return float(line.split()[1])


def test_every_tool_call_of_the_client_takes_the_gateway_direct_path(run: Run) -> None:
    # The client's calls are plain tools/call requests: the gateway answers them itself, and
    # the tests of this module check those answers as the client decoded them.
    tool_calls = [v for v in run.out.values() if isinstance(v, dict) and "isError" in v]
    assert len(tool_calls) >= 8
    assert run.direct_calls == len(tool_calls)


def test_the_client_is_the_pinned_sdk_and_negotiates_its_own_protocol_version(run: Run) -> None:
    assert run.out["sdkVersion"] == locked_versions(CLIENT_DIR)[SDK_PACKAGE]
    server = run.out["server"]
    assert server["info"] == {"name": "blackboard-mcp", "version": __version__}
    assert "expect_version" in server["instructions"]
    assert server["protocolVersion"] == run.out["clientLatestProtocol"]
    # Stateless: the gateway hands out no session, so any replica can answer the next call.
    assert server["sessionId"] is None


def test_list_tools_shows_exactly_the_five_tools_with_their_required_arguments(
    run: Run,
) -> None:
    tools = {t["name"]: t for t in run.out["tools"]}
    assert sorted(tools) == sorted(FIVE_TOOLS) and len(run.out["tools"]) == 5
    assert tools["update_state"]["required"] == ["uri", "digest"]
    assert tools["get_state"]["required"] == ["uris"]
    assert tools["list_keys"]["required"] == []
    assert tools["search_keys"]["required"] == ["q"]
    assert tools["link_state"]["required"] == ["src", "rel", "dst"]
    # Without an output schema the SDK does not validate structuredContent against one.
    assert not any(t["hasOutputSchema"] for t in run.out["tools"])


def test_writes_are_compare_and_swap_and_a_stale_version_is_a_conflict_tool_error(
    run: Run,
) -> None:
    first, second = run.note("first"), run.note("second")
    assert first.startswith(f"bb://{run.workspace}/findings/")
    assert second.startswith(f"bb://{run.workspace}/findings/")
    assert not run.is_error("create")
    assert run.result("create") == {
        "version": 1,
        "digest": "Sea otters hold hands while sleeping",
        "warnings": [],
    }
    assert run.is_error("conflict")
    error = run.result("conflict")["error"]
    assert error["code"] == "conflict"
    assert error["current_version"] == 1
    assert error["current_digest"] == "Sea otters hold hands while sleeping"
    assert error["hint"] and first in error["message"]
    assert "Traceback" not in error["message"]
    assert not run.is_error("update")
    assert run.result("update") == {
        "version": 2,
        "digest": "Sea otters hold hands while sleeping in kelp",
        "warnings": [],
    }
    assert not run.is_error("createSecond")
    assert run.result("createSecond")["version"] == 1


def test_get_state_reads_digests_by_default_and_bodies_and_tables_in_full_mode(
    run: Run,
) -> None:
    first, second = run.note("first"), run.note("second")
    assert not run.is_error("getDigest")
    digest = run.result("getDigest")
    [item] = digest["items"]
    assert item["uri"] == first and item["version"] == 2
    assert item["digest"] == "Sea otters hold hands while sleeping in kelp"
    assert "body" not in item
    assert digest["truncated"] is False and digest["omitted_at"] == []
    # Three writes landed; the conflicting one took no sequence number.
    assert digest["cursor"] == 3

    assert not run.is_error("getFull")
    full = run.result("getFull")
    assert [(i["uri"], i["version"]) for i in full["items"]] == [(first, 2), (second, 1)]
    assert full["items"][0]["body"] == "Seen in kelp beds off Monterey, twice."
    assert full["items"][1]["columns"] == ["site", "rafts"]
    assert full["items"][1]["rows"] == [["Monterey", "12"], ["Morro Bay", "3"]]
    assert full["truncated"] is False and full["spent_tokens"] > digest["spent_tokens"]


def test_list_keys_in_table_mode_returns_one_tsv_row_per_note_of_the_topic(run: Run) -> None:
    assert not run.is_error("listTable")
    listing = run.result("listTable")
    header, *rows = listing["table"].split("\n")
    assert header == "uri\tdigest\tversion\test_tokens"
    parsed = [row.split("\t") for row in rows]
    # Most recent first: the second note was written after the first one's update.
    assert [(r[0], r[2]) for r in parsed] == [(run.note("second"), "1"), (run.note("first"), "2")]
    assert parsed[1][1] == "Sea otters hold hands while sleeping in kelp"
    assert listing["items"] == [] and listing["truncated"] is False


def test_search_keys_finds_the_note_by_words_of_its_digest(run: Run) -> None:
    assert not run.is_error("search")
    search = run.result("search")
    assert [i["uri"] for i in search["items"]] == [run.note("first")]
    [hit] = search["items"]
    assert hit["digest"] == "Sea otters hold hands while sleeping in kelp"
    assert hit["score"] > 0
    assert "body" not in hit


def test_link_state_supersedes_and_the_old_note_then_carries_a_warning(run: Run) -> None:
    first, second = run.note("first"), run.note("second")
    assert not run.is_error("link")
    assert run.result("link") == {
        "src": second,
        "rel": "supersedes",
        "linked": [first],
        "warnings": [],
    }
    assert not run.is_error("getSuperseded")
    read = run.result("getSuperseded")
    assert read["warnings"] == [f"{first} is superseded by {second}"]
    assert [i["version"] for i in read["items"]] == [2]
    assert read["cursor"] == 4


def test_the_client_saw_no_transport_error(run: Run) -> None:
    # After initialize the SDK asks for the optional GET event stream; the stateless gateway
    # answers 405, which the SDK accepts quietly, so no idle stream is held or aborted.
    assert run.out["transportErrors"] == []


def test_without_a_token_the_sdk_surfaces_the_gateways_http_401(run: Run) -> None:
    refused = run.out["noToken"]
    assert refused["connected"] is False
    assert refused["name"] == "StreamableHTTPError"
    assert refused["code"] == 401
    # The SDK puts the response body after this prefix: the gateway's own JSON-RPC error,
    # whose message is the reason and whose data holds the board's code.
    prefix = "Streamable HTTP error: Error POSTing to endpoint: "
    assert refused["message"].startswith(prefix), refused
    body = json.loads(refused["message"][len(prefix) :])
    assert body["error"]["data"]["code"] == "unauthenticated"
    assert body["error"]["message"].startswith("an access token is required")
