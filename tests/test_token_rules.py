"""What a token may be: a bounded lifetime and plain names, enforced when issued and verified.

A subject or workspace name ends up in audit lines, log lines and Redis key names; a lifetime
bounds how long a revocation must be kept. Both are checked by whoever issues a token and
again by whoever verifies one, since a token may come from another issuer holding the key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jwt
import pytest
from app_support import InProcessGateway
from support import TEST_JWT_SECRET, agent_token, call

from blackboard_mcp.auth import (
    AuditRecord,
    BadTokenRequest,
    NoRevocations,
    TokenInvalid,
    TokenIssuer,
    TokenVerifier,
    load_signing_keys,
)
from blackboard_mcp.settings import Settings
from blackboard_mcp.store import EmbeddedRedis, RedisAuditLog, SingleRedis, board_client

SECRET = "rules-secret-" + "q" * 40
HOUR = 3600


def pair(max_ttl: int = HOUR) -> tuple[TokenIssuer, TokenVerifier]:
    signing, keys = load_signing_keys(secret=SECRET)
    assert signing is not None
    issuer = TokenIssuer(signing_key=signing, issuer="bb", audience="bb", max_ttl_seconds=max_ttl)
    verifier = TokenVerifier(
        keys=keys,
        issuer="bb",
        audience="bb",
        leeway=5,
        revocations=NoRevocations(),
        max_ttl_seconds=max_ttl,
    )
    return issuer, verifier


def issue(issuer: TokenIssuer, **overrides: object) -> str:
    args: dict[str, object] = {
        "subject": "worker-1",
        "workspace": "w",
        "read": ["*"],
        "write": [],
        "capabilities": ["board_read"],
        "ttl_seconds": 60,
    }
    args.update(overrides)
    return issuer.issue(**args)  # type: ignore[arg-type]


def forged(**claims: object) -> str:
    now = int(time.time())
    base: dict[str, object] = {
        "iss": "bb",
        "aud": "bb",
        "sub": "worker-1",
        "ws": "w",
        "read": ["*"],
        "write": [],
        "caps": [],
        "secrets": [],
        "jti": "j",
        "iat": now,
        "nbf": now,
        "exp": now + 60,
    }
    base.update(claims)
    return jwt.encode(base, SECRET, algorithm="HS256", headers={"kid": "hs"})


def test_a_token_outliving_the_maximum_is_neither_issued_nor_accepted() -> None:
    issuer, verifier = pair(max_ttl=HOUR)
    assert verifier.decode(issue(issuer, ttl_seconds=HOUR)).expires_at > time.time()
    with pytest.raises(BadTokenRequest) as refused:
        issue(issuer, ttl_seconds=HOUR + 1)
    assert refused.value.code == "invalid_argument"
    now = int(time.time())
    with pytest.raises(TokenInvalid):
        verifier.decode(forged(iat=now - 10, nbf=now - 10, exp=now - 10 + HOUR + 1))
    with pytest.raises(TokenInvalid):
        verifier.decode(forged(iat="yesterday"))


@pytest.mark.parametrize("ttl", [0, -1])
def test_a_token_needs_a_positive_lifetime(ttl: int) -> None:
    issuer, _ = pair()
    with pytest.raises(BadTokenRequest):
        issue(issuer, ttl_seconds=ttl)


FORGED_SUBJECTS = [
    "",
    "forged\n1700000000.000\tadmin\tadmin.issue\tok",
    "tab\there",
    "nul\x00",
    "esc\x1b[2J",
    " leading-space",
    "caf\u00e9",
    "brace{ws}",
    "x" * 129,
    "-leading-dash",
]


@pytest.mark.parametrize("subject", FORGED_SUBJECTS, ids=range(len(FORGED_SUBJECTS)))
def test_a_subject_outside_the_name_pattern_is_neither_issued_nor_accepted(
    subject: str,
) -> None:
    issuer, verifier = pair()
    with pytest.raises(BadTokenRequest):
        issue(issuer, subject=subject)
    with pytest.raises(TokenInvalid):
        verifier.decode(forged(sub=subject))


@pytest.mark.parametrize("workspace", ["", "W", "a}b", "a{b", "a\nb", "x" * 65])
def test_a_workspace_outside_the_name_pattern_is_neither_issued_nor_accepted(
    workspace: str,
) -> None:
    issuer, verifier = pair()
    with pytest.raises(BadTokenRequest):
        issue(issuer, workspace=workspace)
    with pytest.raises(TokenInvalid):
        verifier.decode(forged(ws=workspace))


@pytest.mark.parametrize("subject", ["worker-1", "agent.7", "ops_bot", "me@example.org", "A9"])
def test_plain_subjects_are_issued_and_accepted(subject: str) -> None:
    issuer, verifier = pair()
    assert verifier.decode(issue(issuer, subject=subject)).subject == subject


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "blackboard_mcp.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_cli_refuses_a_lifetime_over_the_maximum_and_a_forged_subject(
    tmp_path: Path,
) -> None:
    env = {"BB_JWT_SECRET": TEST_JWT_SECRET, "BB_DATA_DIR": str(tmp_path)}
    long = cli("token", "issue", "--workspace", "w", "--sub", "a", "--ttl", "3650d", env=env)
    assert long.returncode == 2 and "refused" in long.stderr and not long.stdout
    assert "Traceback" not in long.stderr
    bad = cli("token", "issue", "--workspace", "w", "--sub", "a\tb", env=env)
    assert bad.returncode == 2 and "refused" in bad.stderr and not bad.stdout
    capped = cli(
        "token", "issue", "--workspace", "w", "--sub", "a", "--ttl", "2h",
        env={**env, "BB_MAX_TOKEN_TTL": "3600"},
    )  # fmt: skip
    assert capped.returncode == 2 and "refused" in capped.stderr


async def test_the_admin_token_the_cli_issues_is_accepted_by_the_gateway(
    app_gateway: InProcessGateway, redis_server: EmbeddedRedis, workspace: str, tmp_path: Path
) -> None:
    env = {
        "BB_JWT_SECRET": TEST_JWT_SECRET,
        "BB_DATA_DIR": str(tmp_path),
        "BB_REDIS_URL": redis_server.url,
    }
    made = cli("token", "issue", "--workspace", workspace, "--admin", env=env)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] <= Settings().max_token_ttl
    async with app_gateway.mcp_client(token) as client:
        err, body = await call(client, "list_keys")
        assert not err, body


async def test_audit_tail_prints_one_escaped_line_per_record(
    redis_server: EmbeddedRedis, workspace: str
) -> None:
    """Records written before names were checked, or by anything else, cannot forge lines."""

    client = board_client(redis_server.url)
    try:
        log = RedisAuditLog(redis=SingleRedis(client), maxlen=100)
        forged_line = "x\n1700000000.000\tadmin\tadmin.issue\tok\t0.0ms\tbb://w/a/b"
        for subject, tool in ((forged_line, "get_state"), ("worker-1", "update_state")):
            await log.record(
                AuditRecord(
                    at=time.time(),
                    workspace=workspace,
                    subject=subject,
                    tool=tool,
                    addresses=("bb://w/t/a\tb",),
                    outcome="ok",
                    duration_ms=1.0,
                    request_id="r",
                )
            )
    finally:
        await client.aclose()
    tail = cli("audit", "tail", "--workspace", workspace, env={"BB_REDIS_URL": redis_server.url})
    assert tail.returncode == 0, tail.stderr
    header, *lines = tail.stdout.splitlines()
    assert header.split() == ["TIME", "(UTC)", "SUBJECT", "TOOL", "OUTCOME", "MS", "ADDRESSES"]
    assert len(lines) == 2, tail.stdout
    escaped = forged_line.replace("\n", "\\n").replace("\t", "\\t")
    assert lines[0].split()[1] == escaped
    assert "\t" not in tail.stdout
    machine = cli(
        "audit", "tail", "--workspace", workspace, "--json",
        env={"BB_REDIS_URL": redis_server.url},
    )  # fmt: skip
    records = [json.loads(line) for line in machine.stdout.splitlines()]
    assert [r["subject"] for r in records] == [forged_line, "worker-1"]


async def test_the_cli_revokes_within_one_workspace(
    app_gateway: InProcessGateway, redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str
) -> None:
    other = workspace + "-other"
    mine = agent_token(issuer, workspace, sub="cli-agent")
    theirs = agent_token(issuer, other, sub="cli-agent")
    # Made with the key, not issued through the board: not on record, so forced.
    revoked = cli(
        "token", "revoke", "--workspace", workspace, "--sub", "cli-agent", "--force",
        env={"BB_REDIS_URL": redis_server.url, "BB_JWT_SECRET": TEST_JWT_SECRET},
    )  # fmt: skip
    assert revoked.returncode == 0, revoked.stderr
    for token, ws, expected in ((mine, workspace, "unauthenticated"), (theirs, other, "ok")):
        async with app_gateway.mcp_client(token) as client:
            err, body = await call(client, "get_state", uris=[f"bb://{ws}/t/a"])
            assert (body["error"]["code"] if err else "ok") == expected


async def test_the_cli_revokes_a_presented_token_until_it_expires(
    app_gateway: InProcessGateway, redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="cli-presented", ttl=600)
    env = {"BB_REDIS_URL": redis_server.url, "BB_JWT_SECRET": TEST_JWT_SECRET}
    wrong = cli("token", "revoke", "--workspace", "elsewhere", "--token", token, env=env)
    assert wrong.returncode == 2 and "refused" in wrong.stderr
    revoked = cli("token", "revoke", "--token", token, env=env)
    assert revoked.returncode == 0, revoked.stderr
    assert workspace in revoked.stdout
    async with app_gateway.mcp_client(token) as client:
        err, body = await call(client, "get_state", uris=[f"bb://{workspace}/t/a"])
        assert err and body["error"]["code"] == "unauthenticated"
