"""The fleet's members: every token the board issues is on record, revocation says what it did,
an admin's topics bound what it may do, and a holder can narrow its token for a sub-agent.

Through the real path: the admin API and ``/oauth/token`` of the app in process, tool
calls through its MCP endpoint, and the CLI as a process, all on the real Redis.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from app_support import InProcessGateway, in_process_gateway
from support import TEST_JWT_SECRET, GatewayProcess, admin_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"


@pytest.fixture
async def app(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    async with in_process_gateway(
        redis_url, tmp_path, rate_limit_per_minute=1_000_000, audit_linger_seconds=0
    ) as gw:
        yield gw


def admin_holding_secrets(issuer: TokenIssuer, workspace: str) -> str:
    """An admin whose token holds the secret handle ``gh``, so that it may grant it."""
    return issuer.issue(
        subject="admin",
        workspace=workspace,
        read=["*"],
        write=["*"],
        capabilities=["admin", "board_read", "board_write", "file_read"],
        secrets=["gh"],
        ttl_seconds=3600,
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def issue(app: InProcessGateway, admin: str, **body: Any) -> dict[str, Any]:
    response = await app.http.post("/admin/tokens", json=body, headers=bearer(admin))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def listed(app: InProcessGateway, admin: str, **params: str) -> list[dict[str, Any]]:
    response = await app.http.get("/admin/tokens", params=params, headers=bearer(admin))
    assert response.status_code == 200, response.text
    tokens: list[dict[str, Any]] = response.json()["tokens"]
    return tokens


async def works(app: InProcessGateway, token: str) -> bool:
    is_error, body = await app.call(token, "list_keys", topic="research")
    if is_error:
        assert body["error"]["code"] in ("unauthenticated", "forbidden"), body
    return not is_error


AGENT = {
    "read": ["research"],
    "write": ["research"],
    "caps": ["board_read", "board_write"],
    "ttl_seconds": 600,
}


async def test_every_issued_token_is_listed_with_its_status_and_last_use(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_holding_secrets(issuer, workspace)
    first = await issue(app, admin, sub="scout", **AGENT)
    second = await issue(app, admin, sub="scribe", **AGENT, secrets=["gh"])
    assert await works(app, first["token"])
    tokens = {t["id"]: t for t in await listed(app, admin)}
    assert set(tokens) == {first["id"], second["id"]}
    scout = tokens[first["id"]]
    assert scout["sub"] == "scout" and scout["status"] == "active"
    assert (scout["read"], scout["write"]) == (["research"], ["research"])
    assert scout["caps"] == ["board_read", "board_write"]
    assert scout["issued_by"] == "admin" and scout["parent"] is None
    assert scout["expires"] == first["expires_at"]
    assert scout["last_used"] is not None and tokens[second["id"]]["last_used"] is None
    # Secret handles by name only.
    assert tokens[second["id"]]["secrets"] == ["gh"]
    assert second["token"] not in str(tokens)
    only = await listed(app, admin, sub="scribe")
    assert [t["id"] for t in only] == [second["id"]]


async def test_the_openapi_description_names_the_listing(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    response = await app.http.get("/admin/openapi.json")
    assert response.status_code == 200
    assert "get" in response.json()["paths"]["/admin/tokens"]


async def test_revoking_what_was_never_issued_is_an_error_unless_forced(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    for body in ({"sub": "nobody-like-this"}, {"id": "deadbeef"}):
        response = await app.http.post("/admin/revoke", json=body, headers=bearer(admin))
        assert response.status_code == 404, response.text
        error = response.json()["error"]
        assert error["code"] == "not_found"
        assert next(iter(body.values())) in error["message"]
    forced = await app.http.post(
        "/admin/revoke", json={"sub": "nobody-like-this", "force": True}, headers=bearer(admin)
    )
    assert forced.status_code == 200, forced.text


async def test_a_token_issued_after_its_subjects_revocation_is_valid_in_the_same_second(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    old = await issue(app, admin, sub="temp4", **AGENT)
    revoked = await app.http.post("/admin/revoke", json={"sub": "temp4"}, headers=bearer(admin))
    assert revoked.status_code == 200, revoked.text
    new = await issue(app, admin, sub="temp4", **AGENT)
    assert (
        jwt.decode(new["token"], options={"verify_signature": False})["iat"]
        - int(jwt.decode(old["token"], options={"verify_signature": False})["iat"])
        < 2
    )
    assert not await works(app, old["token"])
    assert await works(app, new["token"])
    statuses = {t["id"]: t["status"] for t in await listed(app, admin, sub="temp4")}
    assert statuses == {old["id"]: "revoked", new["id"]: "active"}


async def test_an_admin_token_must_hold_every_topic(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    partial = await app.http.post(
        "/admin/tokens",
        json={"sub": "pub-admin", "read": ["pub"], "write": ["pub"], "caps": ["admin"]},
        headers=bearer(admin),
    )
    assert partial.status_code == 403, partial.text
    assert "every topic" in partial.json()["error"]["message"]
    # One made elsewhere with the key (or before this rule) is no admin at all.
    narrow = issuer.issue(
        subject="pub-admin",
        workspace=workspace,
        read=["pub"],
        write=["pub"],
        capabilities=["admin", "board_read"],
        ttl_seconds=600,
    )
    for method, path, body in (
        ("POST", "/admin/delete", {"topic": "secret", "dry_run": True}),
        ("POST", "/admin/revoke", {"sub": "admin", "force": True}),
        ("GET", "/admin/tokens", None),
    ):
        response = await app.http.request(method, path, json=body, headers=bearer(narrow))
        assert response.status_code == 403, (path, response.text)


async def test_an_issue_that_grants_nothing_is_refused(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    response = await app.http.post("/admin/tokens", json={"sub": "x"}, headers=bearer(admin))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_argument"
    assert await listed(app, admin) == []


async def exchange(app: InProcessGateway, token: str, **form: str) -> tuple[int, dict[str, Any]]:
    data = {"grant_type": EXCHANGE, "subject_token": token, "subject_token_type": ACCESS_TOKEN}
    data.update(form)
    response = await app.http.post("/oauth/token", data=data)
    answer: dict[str, Any] = response.json()
    return response.status_code, answer


async def test_a_holder_narrows_its_token_for_a_sub_agent(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_holding_secrets(issuer, workspace)
    parent = await issue(
        app,
        admin,
        sub="orchestrator",
        read=["research", "plan"],
        write=["research"],
        caps=["board_read", "board_write"],
        secrets=["gh"],
        ttl_seconds=600,
    )
    status, child = await exchange(
        app, parent["token"], scope="read:research board_read", expires_in="60"
    )
    assert status == 200, child
    assert child["issued_token_type"] == ACCESS_TOKEN and child["token_type"] == "Bearer"
    assert 0 < child["expires_in"] <= 60
    assert child["scope"] == "read:research board_read"
    claims = jwt.decode(child["access_token"], options={"verify_signature": False})
    assert claims["act"]["sub"] == "orchestrator"
    assert claims["read"] == ["research"] and claims["write"] == [] and claims["secrets"] == []
    token = child["access_token"]
    assert await works(app, token)
    is_error, body = await app.call(
        token, "update_state", uri=f"bb://{workspace}/research/x", digest="d", body="b"
    )
    assert is_error and body["error"]["code"] == "forbidden"
    tokens = {t["id"]: t for t in await listed(app, admin)}
    assert tokens[claims["jti"]]["parent"] == parent["id"]
    # A longer life than the parent's is cut to the parent's.
    status, long = await exchange(app, parent["token"], expires_in="999999")
    assert status == 200, long
    assert long["expires_in"] <= 600


@pytest.mark.parametrize(
    "scope",
    ["read:secret board_read", "write:plan board_write", "file_read", "admin", "secret:aws"],
)
async def test_a_delegation_beyond_the_parent_is_refused_with_invalid_scope(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str, scope: str
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    parent = await issue(app, admin, sub="orchestrator", **AGENT)
    status, answer = await exchange(app, parent["token"], scope=scope)
    assert status == 400, answer
    assert answer["error"] == "invalid_scope"
    assert len(await listed(app, admin)) == 1


async def test_an_admin_delegates_no_admin(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    status, answer = await exchange(
        app, admin_token(issuer, workspace, ttl=3600), scope="admin board_read read:*"
    )
    assert (status, answer["error"]) == (400, "invalid_scope")
    status, answer = await exchange(app, admin_token(issuer, workspace, ttl=3600))
    assert status == 200, answer
    claims = jwt.decode(answer["access_token"], options={"verify_signature": False})
    assert "admin" not in claims["caps"]


async def test_revoking_a_parent_revokes_every_token_delegated_from_it(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    for how in ("id", "sub"):
        parent = await issue(app, admin, sub=f"lead-{how}", **AGENT)
        _, child = await exchange(app, parent["token"])
        _, grandchild = await exchange(app, child["access_token"])
        tokens = [child["access_token"], grandchild["access_token"]]
        assert all([await works(app, t) for t in tokens])
        target = {"id": parent["id"]} if how == "id" else {"sub": f"lead-{how}"}
        response = await app.http.post("/admin/revoke", json=target, headers=bearer(admin))
        assert response.status_code == 200, response.text
        assert not any([await works(app, t) for t in tokens]), how


async def test_delegation_depth_is_bounded(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    token = (await issue(app, admin, sub="root-agent", **AGENT))["token"]
    depth = 0
    while True:
        status, answer = await exchange(app, token)
        if status != 200:
            break
        token, depth = answer["access_token"], depth + 1
        assert depth < 10
    assert answer["error"] == "invalid_request" and "depth" in answer["error_description"]
    assert depth == 3


async def test_a_bad_exchange_is_refused_in_the_rfcs_shape(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    parent = (await issue(app, admin, sub="orchestrator", **AGENT))["token"]
    status, answer = await exchange(app, parent, grant_type="client_credentials")
    assert (status, answer["error"]) == (400, "unsupported_grant_type")
    status, answer = await exchange(app, "not-a-token")
    assert (status, answer["error"]) == (400, "invalid_request")
    status, answer = await exchange(app, parent, subject_token_type="urn:x")
    assert (status, answer["error"]) == (400, "invalid_request")
    status, answer = await exchange(app, parent, scope="read:Not A Topic")
    assert (status, answer["error"]) == (400, "invalid_scope")
    revoked = await app.http.post(
        "/admin/revoke", json={"sub": "orchestrator"}, headers=bearer(admin)
    )
    assert revoked.status_code == 200
    status, answer = await exchange(app, parent)
    assert (status, answer["error"]) == (400, "invalid_request")


async def test_delegations_are_audited(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    parent = await issue(app, admin, sub="orchestrator", **AGENT)
    status, child = await exchange(app, parent["token"], scope="read:research board_read")
    assert status == 200
    child_id = jwt.decode(child["access_token"], options={"verify_signature": False})["jti"]
    records: list[dict[str, Any]] = []
    # The audit is written off the call's path: let its writer run until the record is in.
    for _ in range(10_000):
        response = await app.http.get("/board/api/audit", headers=bearer(admin))
        assert response.status_code == 200, response.text
        records = [r for r in response.json()["records"] if r["tool"] == "token.delegate"]
        if records:
            break
        await asyncio.sleep(0)
    [record] = records
    assert record["subject"] == "orchestrator"
    assert any(child_id in a for a in record["addresses"]), record


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "blackboard_mcp.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_cli_lists_revokes_truthfully_and_delegates(
    gateway: GatewayProcess, redis_server: EmbeddedRedis, workspace: str, tmp_path: Path
) -> None:
    env = {
        "BB_JWT_SECRET": TEST_JWT_SECRET,
        "BB_DATA_DIR": str(tmp_path),
        "BB_REDIS_URL": redis_server.url,
    }
    ws = workspace
    made = cli(
        "token", "issue", "--workspace", ws, "--sub", "scout", "--read", "research",
        "--cap", "board_read", "--ttl", "1h", env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    parent = made.stdout.strip()
    url = ["--url", gateway.url]
    child = cli(
        "token", "delegate", "--scope", "read:research board_read", "--ttl", "10m", *url,
        env={**env, "BB_TOKEN": parent},
    )  # fmt: skip
    assert child.returncode == 0, child.stderr
    child_claims = jwt.decode(child.stdout.strip(), options={"verify_signature": False})
    piped = subprocess.run(
        [
            sys.executable,
            "-m",
            "blackboard_mcp.cli",
            "token",
            "delegate",
            "--scope",
            "board_read",
            *url,
        ],
        input=parent,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.returncode == 0, piped.stderr
    beyond = cli(
        "token", "delegate", "--scope", "write:research", *url, env={**env, "BB_TOKEN": parent}
    )
    assert beyond.returncode == 2 and "invalid_scope" in beyond.stderr, beyond.stderr
    listing = cli("token", "list", "--workspace", ws, "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    tokens = json.loads(listing.stdout)
    assert len(tokens) == 3
    by_id = {t["id"]: t for t in tokens}
    assert by_id[child_claims["jti"]]["parent"] is not None
    assert all(t["status"] == "active" and t["sub"] == "scout" for t in tokens)
    assert all(isinstance(t["expires"], int | float) for t in tokens)
    people = cli("token", "list", "--workspace", ws, env=env)
    assert people.returncode == 0 and "scout" in people.stdout
    typo = cli("token", "revoke", "--workspace", ws, "--sub", "nobody-like-this", env=env)
    assert typo.returncode == 2 and "nobody-like-this" in typo.stderr, typo.stderr
    assert "revoked" not in typo.stdout
    bad_id = cli("token", "revoke", "--workspace", ws, "--id", "deadbeef", env=env)
    assert bad_id.returncode == 2 and "deadbeef" in bad_id.stderr
    forced = cli("token", "revoke", "--workspace", ws, "--sub", "ghost", "--force", env=env)
    assert forced.returncode == 0, forced.stderr
    gone = cli("token", "revoke", "--workspace", ws, "--sub", "scout", env=env)
    assert gone.returncode == 0, gone.stderr
    after = json.loads(cli("token", "list", "--workspace", ws, "--json", env=env).stdout)
    assert {t["status"] for t in after} == {"revoked"}


def test_the_cli_refuses_an_admin_with_partial_topics(redis_url: str, tmp_path: Path) -> None:
    env = {
        "BB_JWT_SECRET": TEST_JWT_SECRET,
        "BB_DATA_DIR": str(tmp_path),
        "BB_REDIS_URL": redis_url,
    }
    made = cli(
        "token", "issue", "--workspace", "w", "--sub", "a", "--read", "pub",
        "--cap", "admin,board_read", env=env,
    )  # fmt: skip
    assert made.returncode == 2 and "every topic" in made.stderr, made.stderr


async def test_an_exchange_is_rate_limited_like_any_call(
    redis_url: str, tmp_path: Path, issuer: TokenIssuer, workspace: str
) -> None:
    async with in_process_gateway(redis_url, tmp_path, rate_limit_per_minute=3) as limited:
        admin = admin_token(issuer, workspace, ttl=3600)
        parent = await issue(limited, admin, sub="busy", **AGENT)
        answers = [await exchange(limited, parent["token"]) for _ in range(4)]
    assert [status for status, _ in answers] == [200, 200, 200, 429]
    assert "rate limit" in answers[-1][1]["error_description"]
