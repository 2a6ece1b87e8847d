"""The command line as people meet it: what it is, what each option takes, and a clear
refusal (one line, the reason, a non-zero exit) for each mistake an operator makes."""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lifecycle_support import cli_env, on_redis, run_cli
from support import (
    TEST_JWT_SECRET,
    GatewayProcess,
    agent_token,
    call,
    child_process,
    mcp_client,
)

from blackboard_mcp import __version__
from blackboard_mcp.auth import CAPABILITIES, TokenIssuer
from blackboard_mcp.cli import build_parser
from blackboard_mcp.store import Board, EmbeddedRedis, UpdateState

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z"


def keyed(home: Path, **settings: str) -> dict[str, str]:
    return cli_env(home, BB_JWT_SECRET=TEST_JWT_SECRET, **settings)


def keyed_to(home: Path, redis_url: str) -> dict[str, str]:
    """Keyed, with the board's Redis, where an issued token is recorded."""
    return keyed(home, BB_REDIS_URL=redis_url)


def test_version_prints_the_programs_name_and_version(tmp_path: Path) -> None:
    result = run_cli("--version", env=cli_env(tmp_path))
    assert result.returncode == 0
    assert result.stdout.strip() == f"blackboard-mcp {__version__}"


def test_the_top_level_help_says_what_the_program_is(tmp_path: Path) -> None:
    result = run_cli("--help", env=cli_env(tmp_path))
    assert result.returncode == 0
    assert "shared blackboard for fleets of LLM agents" in result.stdout
    for command in ("serve", "token", "audit", "delete", "retention", "export", "import"):
        assert re.search(rf"^\s+{command}\b", result.stdout, re.MULTILINE), command
    assert "packages do the work" not in result.stdout


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.extend(_parsers(child))
    return found


def test_every_option_and_argument_has_help_text() -> None:
    missing = [
        f"{parser.prog} {action.option_strings or action.dest}"
        for parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction | argparse._HelpAction)
        and not action.help
    ]
    assert missing == []


def test_the_token_options_say_their_format_default_and_choices(tmp_path: Path) -> None:
    text = " ".join(run_cli("token", "issue", "--help", env=cli_env(tmp_path)).stdout.split())
    assert "90s, 30m, 12h, 7d" in text and "default: 24h" in text
    assert text.count("comma-separated") >= 4
    assert all(name in text for name in CAPABILITIES)


# -- token issue: one refusal each ------------------------------------------------------------


def assert_refused(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""  # no token printed
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_token_issue_refuses_an_unknown_capability_listing_the_valid_ones(tmp_path: Path) -> None:
    result = run_cli(
        "token", "issue", "--workspace", "w", "--sub", "a", "--cap", "board_read,superpower",
        env=keyed(tmp_path),
    )  # fmt: skip
    assert_refused(result, "'superpower'", *CAPABILITIES)


def test_token_issue_refuses_a_ttl_without_a_unit(tmp_path: Path) -> None:
    result = run_cli(
        "token", "issue", "--workspace", "w", "--sub", "a", "--ttl", "3600", env=keyed(tmp_path)
    )
    assert_refused(result, "'3600' is not a duration", "add the unit")


def test_token_issue_refuses_an_invalid_workspace_name(tmp_path: Path) -> None:
    result = run_cli("token", "issue", "--workspace", "My Space", "--sub", "a", env=keyed(tmp_path))
    assert_refused(result, "workspace 'My Space' is not a valid name")


def test_token_issue_refuses_an_agent_token_without_a_subject(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    result = run_cli(
        "token",
        "issue",
        "--workspace",
        "w",
        "--read",
        "t",
        env=keyed_to(tmp_path, redis_server.url),
    )
    assert_refused(result, "needs --sub")
    admin = run_cli(
        "token", "issue", "--workspace", "w", "--admin", env=keyed_to(tmp_path, redis_server.url)
    )
    assert admin.returncode == 0, admin.stderr  # an admin token is named admin by default


def test_a_refused_workspace_name_says_the_rule(tmp_path: Path) -> None:
    result = run_cli(
        "token", "issue", "--workspace", "Default", "--sub", "a", "--cap", "board_read",
        "--read", "t", env=keyed(tmp_path),
    )  # fmt: skip
    assert_refused(result, "'Default'", "a-z 0-9 . _ -")


def test_an_unknown_option_is_refused_naming_the_command_typed(tmp_path: Path) -> None:
    result = run_cli("token", "issue", "--workspace", "w", "--bogus", env=keyed(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "blackboard-mcp token issue --help" in result.stderr, result.stderr
    assert "unrecognized arguments: --bogus" in result.stderr


def _commands(*, needing_arguments: bool = False) -> list[list[str]]:
    """Every command a person can type (the words that lead to each leaf parser), or only
    those with an argument they cannot do without."""
    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        required = any(a.required for a in parser._actions)
        if not subs and (required or not needing_arguments):
            found.append(words)
        for action in subs:
            for name, child in action.choices.items():
                walk(child, [*words, name])

    walk(build_parser(), [])
    return found


def assert_two_line_refusal(result: subprocess.CompletedProcess[str], command: list[str]) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"blackboard-mcp {' '.join(command)} --help" in lines[1]


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_every_command_refuses_an_unknown_option_in_two_lines(
    tmp_path: Path, command: list[str]
) -> None:
    result = run_cli(*command, "--no-such-option", env=keyed(tmp_path), timeout=30)
    assert_two_line_refusal(result, command)


@pytest.mark.parametrize("command", _commands(needing_arguments=True), ids=" ".join)
def test_every_command_refuses_a_missing_argument_in_two_lines(
    tmp_path: Path, command: list[str]
) -> None:
    result = run_cli(*command, env=keyed(tmp_path), timeout=30)
    assert_two_line_refusal(result, command)


def test_token_issue_refuses_topics_without_the_capability_to_use_them(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    # A token with read topics and no board_read can do nothing: say so rather than issue it.
    result = run_cli(
        "token", "issue", "--workspace", "w", "--sub", "a", "--read", "ops", env=keyed(tmp_path)
    )  # fmt: skip
    assert_refused(result, "--cap board_read")
    result = run_cli(
        "token", "issue", "--workspace", "w", "--sub", "a", "--write", "ops", env=keyed(tmp_path)
    )  # fmt: skip
    assert_refused(result, "--cap board_write")
    fine = run_cli(
        "token", "issue", "--workspace", "w", "--sub", "a", "--read", "ops", "--cap",
        "board_read", env=keyed_to(tmp_path, redis_server.url),
    )  # fmt: skip
    assert fine.returncode == 0, fine.stderr


def test_token_issue_says_the_longest_lifetime_in_days(tmp_path: Path) -> None:
    result = run_cli(
        "token", "issue", "--workspace", "w", "--sub", "a", "--cap", "board_read", "--read", "t",
        "--ttl", "91d", env=keyed(tmp_path),
    )  # fmt: skip
    assert_refused(result, "90d")


# -- token inspect -----------------------------------------------------------------------------


def inspect(token: str, env: dict[str, str]) -> tuple[int, dict[str, object]]:
    result = run_cli("token", "inspect", token, env=env)
    assert "Traceback" not in result.stderr
    return result.returncode, json.loads(result.stdout)


def test_token_inspect_prints_iso_times_and_says_valid(
    issuer: TokenIssuer, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    code, claims = inspect(agent_token(issuer, "w"), on_redis(tmp_path, redis_server.url))
    assert code == 0
    assert re.fullmatch(ISO, str(claims["iat"])) and re.fullmatch(ISO, str(claims["exp"]))
    assert (claims["status"], claims["revocation"]) == ("valid", "not revoked")
    code, claims = inspect(agent_token(issuer, "w"), keyed(tmp_path))
    assert code == 0 and str(claims["revocation"]).startswith("not checked")


def test_token_inspect_says_expired_with_a_non_zero_exit(
    issuer: TokenIssuer, tmp_path: Path
) -> None:
    from blackboard_mcp.auth import TokenIssuer, load_signing_keys

    signing, _ = load_signing_keys(secret=TEST_JWT_SECRET)
    assert signing is not None
    # Issued an hour ago for a minute: expired, with no wait for the clock.
    an_hour_ago = TokenIssuer(
        signing_key=signing,
        issuer="blackboard-mcp",
        audience="blackboard-mcp",
        clock=lambda: time.time() - 3600,
    )
    token = agent_token(an_hour_ago, "w", ttl=60)
    code, claims = inspect(token, keyed(tmp_path, BB_JWT_LEEWAY_SECONDS="0"))
    assert code == 1
    assert claims["status"] == "expired" and claims["sub"] == "agent-1"


def test_token_inspect_says_revoked_with_a_non_zero_exit(
    issuer: TokenIssuer, redis_server: EmbeddedRedis, tmp_path: Path, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="leaky")
    env = on_redis(tmp_path, redis_server.url)
    revoked = run_cli("token", "revoke", "--token", token, env=env)
    assert revoked.returncode == 0, revoked.stderr
    code, claims = inspect(token, env)
    assert code == 1
    assert (claims["status"], claims["revocation"]) == ("revoked", "revoked")


def test_token_inspect_json_prints_one_object_on_one_line(
    tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    issued = run_cli(
        "token", "issue", "--workspace", "w", "--sub", "a", "--cap", "board_read", "--read",
        "t", env=keyed_to(tmp_path, redis_server.url),
    )  # fmt: skip
    shown = run_cli(
        "token",
        "inspect",
        "--json",
        issued.stdout.strip(),
        env=keyed_to(tmp_path, redis_server.url),
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "valid"


# -- audit tail --------------------------------------------------------------------------------


async def test_audit_tail_prints_aligned_columns_with_iso_times(
    gateway: GatewayProcess,
    issuer: TokenIssuer,
    redis_server: EmbeddedRedis,
    workspace: str,
    tmp_path: Path,
) -> None:
    async with mcp_client(gateway.mcp_url, agent_token(issuer, workspace)) as client:
        await call(client, "update_state", uri=f"bb://{workspace}/t/a", digest="d", body="b")
        await call(client, "list_keys", topic="t")
    async with mcp_client(gateway.mcp_url, agent_token(issuer, workspace, sub="x")) as client:
        await call(client, "get_state", uris=[f"bb://{workspace}/t/a"])
    result = run_cli(
        "audit", "tail", "--workspace", workspace, env=on_redis(tmp_path, redis_server.url)
    )
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert len(rows) == 3
    for column in ("SUBJECT", "TOOL", "OUTCOME", "MS"):
        start = header.index(column)
        # Every row has a column boundary exactly there: two spaces, then the value.
        assert all(row[start - 2 : start] == "  " and row[start] != " " for row in rows), column
    assert all(re.match(ISO, row) for row in rows)
    assert all(line == line.rstrip() for line in result.stdout.splitlines())


def test_audit_tail_says_when_a_workspace_does_not_exist(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str
) -> None:
    result = run_cli(
        "audit", "tail", "--workspace", workspace, env=on_redis(tmp_path, redis_server.url)
    )
    assert result.returncode == 1
    assert f"no workspace {workspace!r}" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    "command",
    [("export",), ("retention", "show")],
    ids=["export", "retention show"],
)
def test_a_mistyped_workspace_is_named_not_answered_as_empty(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str, command: tuple[str, ...]
) -> None:
    # A backup cron with a typo must not make empty backups, nor a check say "off".
    out = tmp_path / "backup.jsonl"
    extra = ("--out", str(out)) if command == ("export",) else ()
    result = run_cli(
        *command, "--workspace", workspace, *extra, env=on_redis(tmp_path, redis_server.url)
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 2, result.stderr
    assert f"no workspace {workspace!r}" in lines[0]
    assert result.stdout == "" and not out.exists()


async def test_audit_tail_says_when_a_workspace_has_no_records(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str
) -> None:
    # Written straight to the store (as an import or a script would), so nothing audited it.
    board = Board.from_url(redis_server.url)
    try:
        await board.update_state(
            UpdateState.parse({"uri": f"bb://{workspace}/t/a", "digest": "d", "body": ""}),
            author="a",
        )
    finally:
        await board.close()
    result = run_cli(
        "audit", "tail", "--workspace", workspace, env=on_redis(tmp_path, redis_server.url)
    )
    assert result.returncode == 0
    assert f"no audit records for workspace {workspace!r}" in result.stderr


async def test_audit_tail_follow_prints_records_as_they_are_written(
    gateway: GatewayProcess,
    issuer: TokenIssuer,
    redis_server: EmbeddedRedis,
    workspace: str,
    tmp_path: Path,
) -> None:
    token = agent_token(issuer, workspace)
    async with mcp_client(gateway.mcp_url, token) as client:
        await call(client, "update_state", uri=f"bb://{workspace}/t/a", digest="d", body="b")
    follower = child_process(
        [sys.executable, "-m", "blackboard_mcp.cli", "audit", "tail", "--workspace", workspace,
         "--json", "--follow"],
        env=on_redis(tmp_path, redis_server.url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert first["tool"] == "update_state"
        async with mcp_client(gateway.mcp_url, token) as client:
            await call(client, "list_keys", topic="t")
        second = json.loads(follower.stdout.readline())
        assert (second["tool"], second["subject"]) == ("list_keys", "agent-1")
    finally:
        follower.send_signal(signal.SIGINT)
        # Generous: a loaded machine may take seconds to deliver the signal and unwind.
        _, errors = follower.communicate(timeout=60)  # closes the pipes too
    assert follower.returncode == 130, errors
    assert "Traceback" not in errors


@pytest.mark.parametrize(
    "given",
    ["{base}", "{base}/", "{base}/mcp/", "{base}/mcp", "{hostport}"],
    ids=["base", "base slash", "endpoint serve prints", "endpoint without slash", "host:port"],
)
def test_health_url_takes_what_people_paste(
    gateway: GatewayProcess, tmp_path: Path, given: str
) -> None:
    base = gateway.url
    url = given.format(base=base, hostport=base.split("://", 1)[1])
    result = run_cli("health", "--url", url, env=cli_env(tmp_path))
    assert "gateway /healthz: 200" in result.stdout, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
