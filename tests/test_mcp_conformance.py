"""The MCP conformance suite's server scenarios, run against a real gateway.

``@modelcontextprotocol/conformance`` (pinned in tests/conformance/package.json, with the
Node 22 it needs) drives the gateway with the TypeScript SDK's client. Every server scenario
the suite lists is named below: the ones that apply to a board with tools and resources must
pass, the others are listed with the reason they do not apply. A suite release that adds a
scenario fails this test until it is placed in one list or the other.

The suite's client sends no token and has no option for one, so it talks to the gateway
through a front that adds a bearer token to each request (tests/conformance_support.py),
as a client configured with a token would.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conformance_support import token_front
from npm_support import installed_from_lockfile, locked_node
from support import GatewayProcess, agent_token

from blackboard_mcp.auth import TokenIssuer

SUITE_DIR = Path(__file__).parent / "conformance"
NPM_CI_TIMEOUT_SECONDS = 300
SCENARIO_TIMEOUT_SECONDS = 120

APPLIES = {
    "server-initialize": "the handshake of the protocol versions before 2026-07-28",
    "ping": "ping answers {}",
    "tools-list": "the five tools, each with a name, a description and an input schema",
    "resources-list": "the catch-up note and the topics the token may read",
    # The suite reaches the gateway through the token front, which forwards the request's
    # Origin as sent (and its own Host): the gateway refuses a foreign Origin.
    "dns-rebinding-protection": "a request from a foreign Origin is refused",
}
DOES_NOT_APPLY = {
    # Both stop at once, with a warning, on a server that gives no session id: the gateway
    # keeps no sessions (any process answers any request), so there is no stream to resume.
    "server-sse-polling": "needs a session id; the gateway is stateless",
    "server-sse-multiple-streams": "needs a session id; the gateway is stateless",
    "logging-set-level": "the server declares no logging capability",
    "completion-complete": "the server declares no completions capability",
    "prompts-list": "the server declares no prompts capability",
    "prompts-get-simple": "the server declares no prompts capability",
    "prompts-get-with-args": "the server declares no prompts capability",
    "prompts-get-embedded-resource": "the server declares no prompts capability",
    "prompts-get-with-image": "the server declares no prompts capability",
    "resources-subscribe": "resources.subscribe is false before 2026-07-28; 2026-07-28 "
    "clients listen with subscriptions/listen (tests/test_subscriptions.py)",
    "resources-unsubscribe": "resources.subscribe is false before 2026-07-28",
    "resources-read-text": "reads the suite's fixture test://static-text; the board's own "
    "resources are bb:// notes (tests/test_resources.py)",
    "resources-read-binary": "reads the suite's fixture test://static-binary; notes are text",
    "resources-templates-read": "reads the suite's fixture template test://template/{id}/data",
    "tools-call-simple-text": "calls the suite's fixture tool test_simple_text",
    "tools-call-image": "calls the suite's fixture tool test_image_content",
    "tools-call-audio": "calls the suite's fixture tool test_audio_content",
    "tools-call-embedded-resource": "calls the suite's fixture tool test_embedded_resource",
    "tools-call-mixed-content": "calls the suite's fixture tool test_multiple_content_types",
    "tools-call-with-logging": "calls the suite's fixture tool test_tool_with_logging",
    "tools-call-error": "calls the suite's fixture tool test_error_handling (the board's "
    "tool errors: tests/test_error_codes.py)",
    "tools-call-with-progress": "calls the suite's fixture tool test_tool_with_progress",
    "tools-call-sampling": "calls the suite's fixture tool test_sampling; the board asks "
    "clients for nothing",
    "tools-call-elicitation": "calls the suite's fixture tool test_elicitation",
    "elicitation-sep1034-defaults": "calls the suite's fixture elicitation tool",
    "elicitation-sep1330-enums": "calls the suite's fixture elicitation tool",
    "json-schema-2020-12": "looks for the suite's fixture tool json_schema_2020_12_tool",
}


@dataclass(frozen=True)
class Suite:
    node: str
    cli: Path


@pytest.fixture(scope="session")
def suite() -> Suite:
    modules = installed_from_lockfile(SUITE_DIR, "the conformance suite", NPM_CI_TIMEOUT_SECONDS)
    package = modules / "@modelcontextprotocol" / "conformance"
    manifest = json.loads((package / "package.json").read_text())
    cli = package / manifest["bin"]["conformance"]
    return Suite(locked_node(SUITE_DIR), cli)


@pytest.fixture(scope="module")
def front(gateway: GatewayProcess, issuer: TokenIssuer) -> Iterator[str]:
    with token_front(gateway.url, agent_token(issuer, "conformance")) as url:
        yield url + "/mcp"


def test_every_server_scenario_of_the_suite_is_placed(suite: Suite) -> None:
    listed = subprocess.run(
        [suite.node, str(suite.cli), "list", "--server"],
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_SECONDS,
        check=True,
    ).stdout
    scenarios = set(re.findall(r"^\s+- (\S+)", listed, re.MULTILINE))
    assert scenarios, listed
    assert not set(APPLIES) & set(DOES_NOT_APPLY)
    assert scenarios == set(APPLIES) | set(DOES_NOT_APPLY), (
        f"unplaced: {sorted(scenarios - set(APPLIES) - set(DOES_NOT_APPLY))}; "
        f"gone: {sorted(set(APPLIES) | set(DOES_NOT_APPLY) - scenarios)}"
    )


@pytest.mark.parametrize("scenario", sorted(APPLIES))
def test_a_scenario_that_applies_passes(
    suite: Suite, front: str, scenario: str, tmp_path: Path
) -> None:
    command = [suite.node, str(suite.cli), "server", "--url", front, "--scenario", scenario]
    completed = subprocess.run(
        [*command, "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_SECONDS,
        check=False,
    )
    [checks_file] = tmp_path.rglob("checks.json")
    checks = json.loads(checks_file.read_text())
    failed = [c for c in checks if c["status"] == "FAILURE"]
    assert completed.returncode == 0 and not failed, completed.stdout + completed.stderr
    # Something was checked and nothing only warned.
    assert [c["status"] for c in checks if c["status"] != "INFO"] == ["SUCCESS"] * len(
        [c for c in checks if c["status"] != "INFO"]
    ), checks
    assert any(c["status"] == "SUCCESS" for c in checks), checks
