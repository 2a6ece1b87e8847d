"""The board as an OAuth 2.1 resource server: external tokens verified against a real
JWKS served over HTTP, grants from their scopes, RFC 9728 metadata, RFC 6750 challenges."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import jwt
import orjson
import pytest
from idp_support import FakeIdP, serving_idp
from pydantic import ValidationError
from support import GatewayProcess, admin_token, call, mcp_client, start_gateway, stop_gateway

from blackboard_mcp._composition import read_settings
from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis, free_port

PUBLIC_URL = "https://board.test"
RESOURCE = PUBLIC_URL + "/mcp"
METADATA_URL = PUBLIC_URL + "/.well-known/oauth-protected-resource/mcp"
REFETCH_SECONDS = 1.0
LIST = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def idp() -> Iterator[FakeIdP]:
    with serving_idp() as provider:
        yield provider


@pytest.fixture(scope="module")
def oauth_gateway(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory, idp: FakeIdP
) -> Iterator[GatewayProcess]:
    """Accepts the IdP's tokens, its keys found through its RFC 8414 metadata."""
    process = start_gateway(
        redis_server.url,
        tmp_path_factory.mktemp("oauth-gateway"),
        extra_env={
            "BB_PUBLIC_URL": PUBLIC_URL,
            "BB_OAUTH_ISSUER": idp.issuer,
            "BB_OAUTH_REFETCH_SECONDS": str(REFETCH_SECONDS),
            "BB_OAUTH_SCOPES_SUPPORTED": "bb:read:* bb:write:*",
        },
    )
    yield process
    stop_gateway(process)


def scopes(workspace: str, *more: str) -> str:
    return " ".join(["openid", "profile", f"bb:ws:{workspace}", *more])


async def post_list(gateway: GatewayProcess, token: str | None) -> httpx.Response:
    headers = dict(HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(gateway.mcp_url, content=LIST, headers=headers)


def challenge_params(value: str) -> dict[str, str]:
    """The auth-params of one ``Bearer`` challenge (RFC 6750 section 3)."""
    scheme, _, rest = value.partition(" ")
    assert scheme == "Bearer", value
    params: dict[str, str] = {}
    for part in rest.split('", '):
        name, _, quoted = part.partition("=")
        params[name.strip()] = quoted.strip().strip('"')
    return params


def assert_invalid_token(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 401, response.text
    params = challenge_params(response.headers["www-authenticate"])
    assert params["resource_metadata"] == METADATA_URL
    assert params["error"] == "invalid_token"
    assert response.json()["error"]["data"]["code"] == "unauthenticated"
    return params


async def test_an_external_token_is_accepted_and_scoped_by_its_scopes(
    oauth_gateway: GatewayProcess, idp: FakeIdP, workspace: str
) -> None:
    writer = idp.token(
        kid="rsa-1",
        scope=scopes(workspace, "bb:read:research-*", "bb:write:research-*"),
        audience=RESOURCE,
    )
    note = f"bb://{workspace}/research-a/one"
    async with mcp_client(oauth_gateway.mcp_url, writer) as client:
        err, body = await call(
            client, "update_state", uri=note, digest="from the IdP", body="x", expect_version=0
        )
        assert not err and body["version"] == 1, body
        err, body = await call(client, "get_state", uris=[note], mode="full")
        assert not err and body["items"][0]["digest"] == "from the IdP", body
        err, body = await call(client, "get_state", uris=[f"bb://{workspace}/secret/x"])
        assert not err and body["items"][0]["error"] == "forbidden", body
        err, body = await call(
            client,
            "update_state",
            uri=f"bb://{workspace}/ops/x",
            digest="d",
            body="",
            expect_version=0,
        )
        assert err and body["error"]["code"] == "forbidden", body
        err, body = await call(client, "get_state", uris=[f"bb://other-{workspace}/research-a/one"])
        assert err and body["error"]["code"] == "forbidden", body
    # An EC key of the same IdP; read scope only: no board_write capability.
    reader = idp.token(kid="ec-1", scope=scopes(workspace, "bb:read:*"), audience=[RESOURCE, "x"])
    async with mcp_client(oauth_gateway.mcp_url, reader) as client:
        err, body = await call(client, "get_state", uris=[note], mode="full")
        assert not err and body["items"][0]["version"] == 1, body
        err, body = await call(
            client, "update_state", uri=note, digest="no", body="", expect_version=1
        )
        assert err and body["error"]["code"] == "forbidden", body
        assert "board_write" in body["error"]["message"], body


async def test_the_boards_own_tokens_keep_working_beside_external_ones(
    oauth_gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    token = admin_token(issuer, workspace)
    async with mcp_client(oauth_gateway.mcp_url, token) as client:
        err, body = await call(client, "list_keys", topic="research")
        assert not err, body


@pytest.mark.parametrize(
    "forge",
    [
        "wrong_audience",
        "board_audience",
        "wrong_issuer",
        "expired",
        "hs256_with_public_key",
        "no_workspace",
        "two_workspaces",
        "unknown_scope",
        "unpublished_key",
    ],
)
async def test_bad_external_tokens_get_401_naming_the_resource_metadata(
    oauth_gateway: GatewayProcess, idp: FakeIdP, workspace: str, forge: str
) -> None:
    good = scopes(workspace, "bb:read:*")
    if forge == "wrong_audience":
        token = idp.token(kid="rsa-1", scope=good, audience="https://other.test/mcp")
    elif forge == "board_audience":
        # The audience of the board's own tokens is not the resource identifier.
        token = idp.token(kid="rsa-1", scope=good, audience="blackboard-mcp")
    elif forge == "wrong_issuer":
        token = idp.token(kid="rsa-1", scope=good, audience=RESOURCE, issuer="https://evil.test")
    elif forge == "expired":
        token = idp.token(kid="rsa-1", scope=good, audience=RESOURCE, ttl=-120)
    elif forge == "hs256_with_public_key":
        token = idp.hs256_with_public_key(kid="rsa-1", scope=good, audience=RESOURCE)
    elif forge == "no_workspace":
        token = idp.token(kid="rsa-1", scope="openid bb:read:*", audience=RESOURCE)
    elif forge == "two_workspaces":
        token = idp.token(kid="rsa-1", scope=good + " bb:ws:another", audience=RESOURCE)
    elif forge == "unknown_scope":
        token = idp.token(kid="rsa-1", scope=good + " bb:raed:*", audience=RESOURCE)
    else:
        # Signed by a key the IdP never published: a look-alike kid does not help.
        idp.add_rsa("rsa-hidden", published=False)
        token = idp.token(kid="rsa-hidden", scope=good, audience=RESOURCE)
        token = jwt.encode(
            jwt.decode(token, options={"verify_signature": False}),
            idp.keys["rsa-hidden"].private,
            algorithm="RS256",
            headers={"kid": "rsa-1"},
        )
    params = assert_invalid_token(await post_list(oauth_gateway, token))
    assert params["error_description"], params


async def test_a_token_with_an_unknown_key_id_is_refused_as_an_invalid_token(
    oauth_gateway: GatewayProcess, idp: FakeIdP, workspace: str
) -> None:
    # How often the gateway refetches the key set for unknown kids is proven against an
    # injected clock (tests/test_oauth_keys.py); here, what a client is answered.
    idp.add_rsa("rsa-never-published", published=False)
    unknown = idp.token(
        kid="rsa-never-published", scope=scopes(workspace, "bb:read:*"), audience=RESOURCE
    )
    params = assert_invalid_token(await post_list(oauth_gateway, unknown))
    assert "key id" in params["error_description"], params


async def test_a_request_without_a_token_is_told_where_the_metadata_is(
    oauth_gateway: GatewayProcess,
) -> None:
    response = await post_list(oauth_gateway, None)
    assert response.status_code == 401
    params = challenge_params(response.headers["www-authenticate"])
    assert params["resource_metadata"] == METADATA_URL
    # RFC 6750 section 3.1: no error code when the request carried no credentials.
    assert "error" not in params


def check_rfc9728_metadata(document: dict[str, object], expected_resource: str) -> None:
    """The checks RFC 9728 section 2 and 3.3 put on a protected resource metadata document."""
    resource = document["resource"]
    assert isinstance(resource, str)
    parts = urlsplit(resource)
    # Section 2 / 1.2: the resource identifier is an https URL without a fragment (no query
    # either: none of ours has one).
    assert parts.scheme == "https" and parts.netloc and not parts.fragment and not parts.query
    # Section 3.3: it is identical to the identifier the well-known URL was formed from.
    assert resource == expected_resource
    servers = document.get("authorization_servers")
    assert isinstance(servers, list) and servers
    for server in servers:
        assert isinstance(server, str) and urlsplit(server).scheme in ("https", "http")
        assert not urlsplit(server).query and not urlsplit(server).fragment
    scopes_supported = document.get("scopes_supported")
    assert isinstance(scopes_supported, list) and all(isinstance(s, str) for s in scopes_supported)
    methods = document.get("bearer_methods_supported")
    # Section 2: a subset of "header", "body", "query"; the board reads the header only.
    assert methods == ["header"]
    for name, value in document.items():
        # Section 2: members with no value are omitted rather than null.
        assert value is not None, name


async def test_the_metadata_documents_follow_rfc_9728(
    oauth_gateway: GatewayProcess, idp: FakeIdP
) -> None:
    async with httpx.AsyncClient() as http:
        for path in (
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ):
            # The Host header plays no part once BB_PUBLIC_URL is set.
            response = await http.get(oauth_gateway.url + path, headers={"Host": "evil.test"})
            assert response.status_code == 200, response.text
            assert response.headers["content-type"].startswith("application/json")
            document = response.json()
            check_rfc9728_metadata(document, RESOURCE)
            assert document["authorization_servers"] == [idp.issuer]
            assert document["scopes_supported"] == ["bb:read:*", "bb:write:*"]
    # Section 3.1: the metadata URL of <public>/mcp inserts the well-known path before /mcp.
    parts = urlsplit(RESOURCE)
    assert f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}" == (
        METADATA_URL
    )


async def test_a_revoked_external_token_is_refused(
    oauth_gateway: GatewayProcess, idp: FakeIdP, issuer: TokenIssuer, workspace: str
) -> None:
    by_id = idp.token(kid="rsa-1", scope=scopes(workspace, "bb:read:*"), audience=RESOURCE)
    by_sub = idp.token(
        kid="ec-1", scope=scopes(workspace, "bb:read:*"), audience=RESOURCE, sub="rogue"
    )
    jti = jwt.decode(by_id, options={"verify_signature": False})["jti"]
    admin = {"Authorization": f"Bearer {admin_token(issuer, workspace)}"}
    async with httpx.AsyncClient() as http:
        for body in ({"id": jti, "force": True}, {"sub": "rogue", "force": True}):
            response = await http.post(
                oauth_gateway.url + "/admin/revoke", json=body, headers=admin
            )
            assert response.status_code == 200, response.text
    for token in (by_id, by_sub):
        async with mcp_client(oauth_gateway.mcp_url, token) as client:
            err, body = await call(client, "list_keys")
            assert err and body["error"]["code"] == "unauthenticated", body
            assert "revoked" in body["error"]["message"], body


async def test_external_admins_use_the_admin_api_within_their_grant(
    oauth_gateway: GatewayProcess, idp: FakeIdP, workspace: str
) -> None:
    admin = idp.token(
        kid="rsa-1",
        scope=scopes(workspace, "bb:admin", "bb:read:*", "bb:write:*"),
        audience=RESOURCE,
        ttl=600,
    )
    agent = idp.token(kid="ec-1", scope=scopes(workspace, "bb:read:*"), audience=RESOURCE)
    not_admin = idp.token(kid="ec-1", scope=scopes(workspace, "bb:write:*"), audience=RESOURCE)
    async with httpx.AsyncClient() as http:
        auth = {"Authorization": f"Bearer {admin}"}
        issued = await http.post(
            oauth_gateway.url + "/admin/tokens",
            json={"sub": "helper", "read": ["notes"], "caps": ["board_read"], "ttl_seconds": 300},
            headers=auth,
        )
        assert issued.status_code == 200, issued.text
        # No longer than the external admin's own token.
        outliving = await http.post(
            oauth_gateway.url + "/admin/tokens",
            json={"sub": "helper", "caps": ["board_read"], "ttl_seconds": 3600},
            headers=auth,
        )
        assert outliving.status_code == 403, outliving.text
        revoked = await http.post(
            oauth_gateway.url + "/admin/revoke", json={"token": agent}, headers=auth
        )
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["workspace"] == workspace
        # Without bb:admin: 403 insufficient_scope, naming the scope it lacks.
        refused = await http.post(
            oauth_gateway.url + "/admin/revoke",
            json={"sub": "helper"},
            headers={"Authorization": f"Bearer {not_admin}"},
        )
    async with mcp_client(oauth_gateway.mcp_url, issued.json()["token"]) as client:
        err, body = await call(client, "get_state", uris=[f"bb://{workspace}/notes/a"])
        assert not err, body
    async with mcp_client(oauth_gateway.mcp_url, agent) as client:
        err, body = await call(client, "list_keys")
        assert err and "revoked" in body["error"]["message"], body
    assert refused.status_code == 403, refused.text
    params = challenge_params(refused.headers["www-authenticate"])
    assert params["error"] == "insufficient_scope" and params["scope"] == "bb:admin"
    assert params["resource_metadata"] == METADATA_URL
    assert refused.json()["error"]["code"] == "forbidden"


async def test_an_unreachable_identity_provider_gives_503_not_a_hang(
    redis_server: EmbeddedRedis, tmp_path: Path, idp: FakeIdP, workspace: str
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/jwks"
    gateway = start_gateway(
        redis_server.url,
        tmp_path / "gw",
        extra_env={
            "BB_PUBLIC_URL": PUBLIC_URL,
            "BB_OAUTH_ISSUER": idp.issuer,
            "BB_OAUTH_JWKS_URL": dead,
            "BB_OAUTH_FETCH_TIMEOUT_SECONDS": "1",
        },
    )
    try:
        token = idp.token(kid="rsa-1", scope=scopes(workspace, "bb:read:*"), audience=RESOURCE)
        started = time.monotonic()
        response = await post_list(gateway, token)
        assert time.monotonic() - started < 5
        assert response.status_code == 503, response.text
        assert response.json()["error"]["data"]["code"] == "unavailable"
        assert "Traceback" not in gateway.log_text()
        # The board's health does not depend on the IdP.
        async with httpx.AsyncClient() as http:
            assert (await http.get(gateway.url + "/healthz")).status_code == 200
    finally:
        stop_gateway(gateway)


async def test_without_a_public_url_only_a_vouched_for_host_names_the_metadata(
    gateway: GatewayProcess,
) -> None:
    async with httpx.AsyncClient() as http:
        own = await http.get(gateway.url + "/.well-known/oauth-protected-resource/mcp")
        assert own.status_code == 200, own.text
        assert own.json()["resource"] == gateway.url + "/mcp"
        assert own.json()["bearer_methods_supported"] == ["header"]
        spoofed = {"Host": "evil.test"}
        response = await http.get(
            gateway.url + "/.well-known/oauth-protected-resource/mcp", headers=spoofed
        )
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
        refused = await http.post(gateway.mcp_url, content=LIST, headers={**HEADERS, **spoofed})
        assert refused.status_code == 401
        assert "evil" not in refused.headers["www-authenticate"]
        assert "resource_metadata" not in refused.headers["www-authenticate"]
        local = await http.post(gateway.mcp_url, content=LIST, headers=HEADERS)
        params = challenge_params(local.headers["www-authenticate"])
        assert (
            params["resource_metadata"] == gateway.url + "/.well-known/oauth-protected-resource/mcp"
        )


def test_an_external_issuer_without_a_public_url_is_refused_at_start(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "BB_OAUTH_ISSUER": "https://idp.test/realms/fleet",
        "BB_DATA_DIR": str(tmp_path),
    }
    env.pop("BB_PUBLIC_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "blackboard_mcp.cli", "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "BB_PUBLIC_URL is required" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ('["bb:read:*", "bb:write:* bb:admin"]', "'bb:write:* bb:admin'"),
        ('["bb:read:*", "say \\"hi\\""]', "'say \"hi\"'"),
        ('["bb:read:*", 7]', "string"),
        ('{"bb:read:*": true}', "'{\"bb:read:*\":'"),
        ("bb:raed:*", "'bb:raed:*'"),
        ("bb:ws:Not_A_Workspace", "'bb:ws:Not_A_Workspace'"),
        ("bb:read:a/**/b", "'bb:read:a/**/b'"),
        ("openid bb:read:* caf\u00e9", "'caf\u00e9'"),
    ],
    ids=["space-in-list", "quote", "not-a-string", "not-a-list", "unknown-bb-scope",
         "bad-workspace", "bad-pattern", "not-ascii"],
)  # fmt: skip
def test_malformed_scopes_supported_are_refused_with_the_scope_named(
    value: str, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BB_OAUTH_SCOPES_SUPPORTED", value)
    with pytest.raises(ValidationError) as refused:
        read_settings()
    assert "oauth_scopes_supported" in str(refused.value) and named in str(refused.value)


def test_serve_refuses_to_start_with_a_malformed_scope_supported(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "BB_OAUTH_SCOPES_SUPPORTED": "bb:read:* bb:raed:*",
        "BB_DATA_DIR": str(tmp_path),
    }
    try:
        result = subprocess.run(
            [sys.executable, "-m", "blackboard_mcp.cli", "serve", "--port", str(free_port())],
            env=env, capture_output=True, text=True, timeout=20,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("serve started with a malformed BB_OAUTH_SCOPES_SUPPORTED")
    assert result.returncode == 2, result.stderr
    assert "BB_OAUTH_SCOPES_SUPPORTED" in result.stderr and "'bb:raed:*'" in result.stderr
    assert "Traceback" not in result.stderr


def test_scopes_supported_may_name_other_scopes_and_every_bb_kind() -> None:
    scopes = "openid profile api://board/.default bb:ws:fleet bb:read:notes-* bb:write:* "
    scopes += "bb:file_read bb:admin"
    settings = read_settings(oauth_scopes_supported=scopes)
    assert settings.oauth_scopes_supported == scopes.split()
