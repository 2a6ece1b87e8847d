"""The MCP conformance suite's 2026-07-28 requirement set, run against a real gateway.

``@modelcontextprotocol/conformance`` (pinned in tests/conformance_2026/package.json, with
the Node 22 it needs) lists, for each spec revision, the server scenarios conformance to it
requires, frozen at the revision's release, and runs them at that revision's wire
(``--requirements 2026-07-28``). Every scenario of the set is named below: those that apply
to a board with tools and resources must pass, the others are listed with the reason they
do not apply. A suite release that adds a scenario to the set fails this test until it is
placed. The protocol versions before 2026-07-28 keep their own run
(tests/test_mcp_conformance.py).

The set runs once, through a front that adds a bearer token to each request
(tests/conformance_support.py), as a client configured with a token would; each scenario
is then judged from the checks it wrote.

A check passes as SUCCESS (or is INFO, which asserts nothing). A WARNING is a SHOULD the
gateway does not meet, and counts as a failure like a FAILURE does: the board meets every
SHOULD it can. The exceptions are the checks listed in FIXTURE_CHECKS: some checks of
scenarios that apply reach for a diagnostic tool or a prompt of the suite's own reference
server, which a board does not have. Each is listed with the status it ends with and why;
a listed check that vanishes, or ends otherwise, fails the test so the list stays true.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from conformance_support import token_front
from npm_support import installed_from_lockfile, locked_node
from support import GatewayProcess, agent_token, call, mcp_client

from blackboard_mcp.auth import TokenIssuer

pytestmark = pytest.mark.node

SUITE_DIR = Path(__file__).parent / "conformance_2026"
REVISION = "2026-07-28"
NPM_CI_TIMEOUT_SECONDS = 300
# The whole set, every scenario bounded by the suite's own 30 s timeout.
RUN_TIMEOUT_SECONDS = 600

_FIXTURE_TOOL = "calls the suite's fixture tool {}; the board's tools are its five"
_FIXTURE_PROMPTS = "the server declares no prompts capability"
_TASKS = "the io.modelcontextprotocol/tasks extension (an optional extension); not offered"
_MRTR = (
    "calls the suite's fixture tool {} for an InputRequiredResult; the board asks clients "
    "for nothing"
)

APPLIES = {
    "server-stateless": "2026-07-28 requests stand alone: per-request _meta, server/discover, "
    "the refusals' HTTP statuses, subscriptions/listen's acknowledgement, tagging and filter",
    "tools-list": "the five tools, each with a name, a description and an input schema",
    "resources-list": "the catch-up note (once it exists) and the topics the token may read",
    "sep-2164-resource-not-found": "a missing note is -32602 with its uri in the error's data",
    "caching": "the list results' and a read's caching hints",
    "server-sse-multiple-streams": "concurrent POSTs are each answered",
    # The suite reaches the gateway through the token front, which forwards the request's
    # Origin as sent (and its own Host): the gateway refuses a foreign Origin.
    "dns-rebinding-protection": "a request from a foreign Origin is refused",
    "input-required-result-unsupported-methods": "tools/list and prompts/list never answer "
    "with an InputRequiredResult",
    # Not scored for 2026-07-28 (pending against the suite's reference server), but the
    # routing headers' checks apply to the board's tools and pass.
    "http-header-validation": "Mcp-Method and Mcp-Name headers checked against the body",
}
DOES_NOT_APPLY = {
    "completion-complete": "the server declares no completions capability",
    "tools-call-simple-text": _FIXTURE_TOOL.format("test_simple_text"),
    "tools-call-image": _FIXTURE_TOOL.format("test_image_content"),
    "tools-call-audio": _FIXTURE_TOOL.format("test_audio_content"),
    "tools-call-embedded-resource": _FIXTURE_TOOL.format("test_embedded_resource"),
    "tools-call-mixed-content": _FIXTURE_TOOL.format("test_multiple_content_types"),
    "tools-call-error": _FIXTURE_TOOL.format("test_error_handling")
    + " (the board's tool errors: tests/test_error_codes.py)",
    "tools-call-with-progress": _FIXTURE_TOOL.format("test_tool_with_progress"),
    "resources-read-text": "reads the suite's fixture test://static-text; the board's own "
    "resources are bb:// notes (tests/test_resources.py)",
    "resources-read-binary": "reads the suite's fixture test://static-binary; notes are text",
    "resources-templates-read": "reads the suite's fixture template test://template/{id}/data",
    "prompts-list": _FIXTURE_PROMPTS,
    "prompts-get-simple": _FIXTURE_PROMPTS,
    "prompts-get-with-args": _FIXTURE_PROMPTS,
    "prompts-get-embedded-resource": _FIXTURE_PROMPTS,
    "prompts-get-with-image": _FIXTURE_PROMPTS,
    "input-required-result-basic-elicitation": _MRTR.format(
        "test_input_required_result_elicitation"
    ),
    "input-required-result-basic-sampling": _MRTR.format("test_input_required_result_sampling"),
    "input-required-result-basic-list-roots": _MRTR.format("test_input_required_result_list_roots"),
    "input-required-result-request-state": _MRTR.format("test_input_required_result_request_state"),
    "input-required-result-multiple-input-requests": _MRTR.format(
        "test_input_required_result_multiple_inputs"
    ),
    "input-required-result-multi-round": _MRTR.format("test_input_required_result_multi_round"),
    "input-required-result-missing-input-response": _MRTR.format(
        "test_input_required_result_elicitation"
    ),
    "input-required-result-non-tool-request": "gets the suite's fixture prompt "
    "test_input_required_result_prompt; " + _FIXTURE_PROMPTS,
    "input-required-result-result-type": _MRTR.format("test_input_required_result_elicitation"),
    "input-required-result-tampered-state": _MRTR.format(
        "test_input_required_result_tampered_state"
    ),
    "input-required-result-capability-check": _MRTR.format(
        "test_input_required_result_capabilities"
    ),
    "input-required-result-ignore-extra-params": _MRTR.format(
        "test_input_required_result_elicitation"
    ),
    # Its checks pass only because the fixture tool is missing: nothing of the board's is
    # measured by them.
    "input-required-result-validate-input": _MRTR.format("test_input_required_result_elicitation"),
    "tasks-lifecycle": _TASKS,
    "tasks-capability-negotiation": _TASKS,
    "tasks-wire-fields": _TASKS,
    "tasks-request-state-removal": _TASKS,
    "tasks-mrtr-input": _TASKS,
    "tasks-request-headers": _TASKS,
    "tasks-dispatch-and-envelope": _TASKS,
    "tasks-status-notifications": _TASKS,
    "tasks-required-task-error": _TASKS,
    "tasks-mrtr-composition": _TASKS,
    "json-schema-2020-12": _FIXTURE_TOOL.format("json_schema_2020_12_tool"),
    "http-custom-header-server-validation": "needs a tool with x-mcp-header parameters; no "
    "board tool declares one",
}
# (scenario, check id): the status it ends with, and why, for the checks of scenarios that
# apply which need something of the suite's own reference server.
FIXTURE_CHECKS = {
    ("server-stateless", "sep-2575-server-rejects-undeclared-capability"): (
        "FAILURE",
        "calls the suite's diagnostic tool test_missing_capability",
    ),
    ("server-stateless", "sep-2575-missing-capability-http-400"): (
        "FAILURE",
        "calls the suite's diagnostic tool test_missing_capability",
    ),
    ("server-stateless", "sep-2575-http-server-no-independent-requests-on-stream"): (
        "FAILURE",
        "calls the suite's diagnostic tool test_streaming_elicitation",
    ),
    ("server-stateless", "sep-2575-server-no-log-without-loglevel"): (
        "FAILURE",
        "calls the suite's diagnostic tool test_logging_tool",
    ),
    # A SHOULD (so a WARNING): the suite changes the tool list through its diagnostic hook
    # test_trigger_tool_change. The board's tool list never changes.
    ("server-stateless", "sep-2575-server-sends-tools-list-changed-on-subscription"): (
        "WARNING",
        "changes the tool list through the suite's diagnostic tool test_trigger_tool_change",
    ),
    ("server-stateless", "sep-2575-server-sends-prompts-list-changed-on-subscription"): (
        "SKIPPED",
        _FIXTURE_PROMPTS,
    ),
    ("caching", "sep-2549-prompts-list-caching-hints"): ("FAILURE", _FIXTURE_PROMPTS),
}
_PASSING = {"SUCCESS", "INFO"}


@dataclass(frozen=True)
class Suite:
    node: str
    cli: Path


@pytest.fixture(scope="module")
def suite() -> Suite:
    modules = installed_from_lockfile(SUITE_DIR, "the conformance suite", NPM_CI_TIMEOUT_SECONDS)
    package = modules / "@modelcontextprotocol" / "conformance"
    manifest = json.loads((package / "package.json").read_text())
    cli = package / manifest["bin"]["conformance"]
    return Suite(locked_node(SUITE_DIR), cli)


@pytest.fixture(scope="module")
def seeded_token(gateway: GatewayProcess, issuer: TokenIssuer) -> str:
    """A token of a workspace with a note on it, so resources/list has a topic to offer
    and the caching scenario reads it."""
    workspace = "conformance-" + uuid.uuid4().hex[:8]
    token = agent_token(issuer, workspace)

    async def seed() -> tuple[bool, dict[str, object]]:
        async with mcp_client(gateway.mcp_url, token) as client:
            return await call(
                client,
                "update_state",
                uri=f"bb://{workspace}/plans/first",
                digest="the first plan",
                body="Read the spec, then write the tests.",
                expect_version=0,
            )

    is_error, body = asyncio.run(seed())
    assert not is_error, body
    return token


@pytest.fixture(scope="module")
def checks(
    suite: Suite,
    gateway: GatewayProcess,
    seeded_token: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, list[dict[str, object]]]:
    """Each scenario's checks, from one run of the whole requirement set."""
    out = tmp_path_factory.mktemp("conformance-2026")
    with token_front(gateway.url, seeded_token) as url:
        command = [str(suite.cli), "server", "--url", url + "/mcp", "--requirements", REVISION]
        completed = subprocess.run(
            [suite.node, *command, "--output-dir", str(out)],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_SECONDS,
            check=False,
        )
    by_scenario: dict[str, list[dict[str, object]]] = {}
    for checks_file in out.glob("server-*/checks.json"):
        # server-<scenario>-<ISO time with ':' and '.' as '-'>
        match = re.fullmatch(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z", checks_file.parent.name)
        assert match, checks_file
        by_scenario[match[1]] = json.loads(checks_file.read_text())
    assert by_scenario, completed.stdout + completed.stderr
    return by_scenario


def test_every_server_scenario_of_the_requirement_set_is_placed(suite: Suite) -> None:
    listed = subprocess.run(
        [suite.node, str(suite.cli), "list", "--server", "--requirements", REVISION],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    # The required ones under their heading, and those run but not scored marked [server].
    required = re.search(r"^Server scenarios.*?\n(.*?)(?:\n\s*\n|\Z)", listed, re.M | re.S)
    assert required, listed
    scenarios = set(re.findall(r"^\s+- (\S+)$", required[1], re.M))
    scenarios |= set(re.findall(r"^\s+- (\S+) \[server\]$", listed, re.M))
    assert scenarios, listed
    assert not set(APPLIES) & set(DOES_NOT_APPLY)
    placed = set(APPLIES) | set(DOES_NOT_APPLY)
    assert scenarios == placed, (
        f"unplaced: {sorted(scenarios - placed)}; gone: {sorted(placed - scenarios)}"
    )


def test_the_run_covers_every_placed_scenario(checks: dict[str, list[dict[str, object]]]) -> None:
    assert set(checks) == set(APPLIES) | set(DOES_NOT_APPLY)
    assert {scenario for scenario, _ in FIXTURE_CHECKS} <= set(APPLIES)


@pytest.mark.parametrize("scenario", sorted(APPLIES))
def test_a_scenario_that_applies_passes(
    checks: dict[str, list[dict[str, object]]], scenario: str
) -> None:
    excused = {
        check_id: status for (s, check_id), (status, _) in FIXTURE_CHECKS.items() if s == scenario
    }
    ended = {str(c["id"]): str(c["status"]) for c in checks[scenario]}
    failed = [
        c
        for c in checks[scenario]
        if c["status"] not in _PASSING and excused.get(str(c["id"])) != c["status"]
    ]
    assert not failed, json.dumps(failed, indent=2)
    assert {i: ended.get(i) for i in excused} == excused
    assert any(
        c["status"] == "SUCCESS" and c["id"] != "wire-schema-valid" for c in checks[scenario]
    ), checks[scenario]
