"""How an external token's claims become a grant, whichever claims its IdP fills (pure logic)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from blackboard_mcp.auth import TokenInvalid
from blackboard_mcp.auth._external import token_id_of
from blackboard_mcp.auth._oauth_scopes import grant_from_scopes


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": "agent-7", "iat": now, "exp": now + 300, **overrides}


def test_keycloak_scope_string_gives_topics_and_capabilities() -> None:
    grant = grant_from_scopes(
        claims(scope="openid profile bb:ws:team-a bb:read:research-* bb:write:drafts bb:file_read"),
        token_id="j1",
    )
    assert grant.workspace == "team-a" and grant.subject == "agent-7"
    assert grant.read_topics == ("research-*",) and grant.write_topics == ("drafts",)
    assert grant.capabilities == {"board_read", "board_write", "file_read"}
    assert grant.can_read("research-x") and not grant.can_read("drafts")
    assert not grant.has_capability("admin") and grant.secrets == frozenset()


def test_entra_scp_and_roles_both_count() -> None:
    # Delegated permissions arrive in `scp` (a string), app roles in `roles` (a list).
    grant = grant_from_scopes(
        claims(scp="bb:ws:team-a bb:read:*", roles=["bb:admin", "bb:write:ops"], oid="x"),
        token_id="u1",
    )
    assert grant.capabilities == {"board_read", "board_write", "admin"}
    assert grant.read_topics == ("*",) and grant.write_topics == ("ops",)


def test_the_subject_can_come_from_another_claim() -> None:
    oid = "3f2b8c1e-0d4a-4c5e-9b7a-1e2d3c4b5a69"
    grant = grant_from_scopes(
        claims(sub="-starts-with-a-dash", oid=oid, scp="bb:ws:w bb:read:*"),
        token_id="u1",
        subject_claim="oid",
    )
    assert grant.subject == oid
    with pytest.raises(TokenInvalid, match="subject"):
        grant_from_scopes(claims(sub="-dash", scp="bb:ws:w"), token_id="u1")
    with pytest.raises(TokenInvalid, match="subject"):
        grant_from_scopes(claims(scp="bb:ws:w"), token_id="u1", subject_claim="oid")


@pytest.mark.parametrize(
    ("scopes", "why"),
    [
        ("bb:read:*", "exactly one"),
        ("bb:ws:a bb:ws:b", "exactly one"),
        ("bb:ws:Bad_Upper", "workspace"),
        ("bb:ws:a bb:read:../x", "topic pattern"),
        ("bb:ws:a bb:read:[abc]", "topic pattern"),
        ("bb:ws:a bb:read:", "not one this board knows"),
        ("bb:ws:a bb:superuser", "not one this board knows"),
    ],
)
def test_bad_scopes_refuse_the_token(scopes: str, why: str) -> None:
    with pytest.raises(TokenInvalid, match=why):
        grant_from_scopes(claims(scope=scopes), token_id="j")


def test_a_scope_claim_of_the_wrong_type_refuses_the_token() -> None:
    with pytest.raises(TokenInvalid, match="scope"):
        grant_from_scopes(claims(scope={"bb:ws:a": True}), token_id="j")


def test_the_token_id_is_jti_else_uti_else_a_digest() -> None:
    assert token_id_of({"jti": "a", "uti": "b"}, "t") == "a"
    assert token_id_of({"uti": "b"}, "t") == "b"
    digest = token_id_of({}, "header.payload.signature")
    assert digest.startswith("sha256-") and digest == token_id_of({}, "header.payload.signature")
    assert digest != token_id_of({}, "header.payload.other")
