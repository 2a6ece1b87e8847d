"""Bad bodies on the admin endpoints: HTTP 400 ``invalid_argument`` with a hint, never a 500.

The gateway's app in process, its log captured for each test and searched for a traceback
afterwards.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from app_support import InProcessGateway
from support import admin_token

from blackboard_mcp.auth import TokenIssuer

WORKSPACE = "ws-admin-input"


@pytest.fixture
async def admin_gateway(
    app_gateway: InProcessGateway, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[InProcessGateway]:
    # A gateway process logs at INFO: a traceback it would have logged fails the test.
    caplog.set_level(logging.INFO)
    yield app_gateway
    logged_errors = [record for record in caplog.records if record.exc_info is not None]
    assert not logged_errors, caplog.text
    assert "Traceback" not in caplog.text


async def post(gateway: InProcessGateway, path: str, token: str, content: bytes) -> httpx.Response:
    return await gateway.http.post(
        path,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        content=content,
    )


def json_bytes(value: Any) -> bytes:
    import json

    return json.dumps(value).encode()


BAD_REVOKES: list[bytes] = [
    json_bytes({"id": "abc", "expires_at": "abc"}),
    json_bytes({"id": "abc", "expires_at": [1]}),
    b'{"id": "abc", "expires_at": 1e300}',
    json_bytes({"id": "abc", "expires_at": 1}),
    json_bytes({"id": 5}),
    json_bytes({"id": ["abc"]}),
    json_bytes({"id": ""}),
    json_bytes({"id": "a\nb"}),
    json_bytes({"id": "x" * 1000}),
    json_bytes({"sub": {"a": 1}}),
    json_bytes({"sub": "forged\n1.0\tadmin"}),
    json_bytes({"id": "abc", "sub": "worker"}),
    json_bytes({}),
    json_bytes({"token": "not-a-jwt"}),
    json_bytes({"token": 7}),
    json_bytes({"unknown": "field"}),
    json_bytes([1, 2]),
    json_bytes("id"),
    json_bytes(None),
    b"{not json",
    b"\xff\xfe",
    b'{"id": "' + b"9" * 5000 + b'"}',
    b'{"sub": ' + b"9" * 5000 + b"}",
]

BAD_ISSUES: list[bytes] = [
    json_bytes({"sub": "w", "ttl_seconds": "abc"}),
    json_bytes({"sub": "w", "ttl_seconds": -5}),
    json_bytes({"sub": "w", "ttl_seconds": 0}),
    json_bytes({"sub": "w", "ttl_seconds": [1]}),
    json_bytes({"sub": "w", "ttl_seconds": True}),
    json_bytes({"sub": "w", "ttl_seconds": 1.5}),
    b'{"sub": "w", "ttl_seconds": 1e300}',
    b'{"sub": "w", "ttl_seconds": ' + b"9" * 5000 + b"}",
    json_bytes({"sub": "w", "ttl_seconds": 10**12}),
    json_bytes({"sub": "w", "read": "alpha"}),
    json_bytes({"sub": "w", "read": [1]}),
    json_bytes({"sub": "w", "read": ["Bad Topic"]}),
    json_bytes({"sub": "w", "caps": {"admin": True}}),
    json_bytes({"sub": "w", "workspace": 3}),
    json_bytes({"sub": "w", "extra": 1}),
    json_bytes({"sub": ""}),
    json_bytes({"sub": "forged\n1.0\tadmin\tadmin.issue"}),
    json_bytes({"sub": "x" * 500}),
    json_bytes({"sub": 12}),
    json_bytes({}),
    json_bytes([]),
    b"",
    b"[",
]


@pytest.mark.parametrize("body", BAD_REVOKES, ids=range(len(BAD_REVOKES)))
async def test_a_bad_revoke_body_gets_invalid_argument_with_a_hint(
    admin_gateway: InProcessGateway, issuer: TokenIssuer, body: bytes
) -> None:
    answer = await post(admin_gateway, "/admin/revoke", admin_token(issuer, WORKSPACE), body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_argument"
    assert error["message"] and error["hint"]


@pytest.mark.parametrize("body", BAD_ISSUES, ids=range(len(BAD_ISSUES)))
async def test_a_bad_token_request_gets_invalid_argument_with_a_hint(
    admin_gateway: InProcessGateway, issuer: TokenIssuer, body: bytes
) -> None:
    answer = await post(admin_gateway, "/admin/tokens", admin_token(issuer, WORKSPACE), body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_argument"
    assert error["message"] and error["hint"]


async def test_good_admin_bodies_are_still_accepted(
    admin_gateway: InProcessGateway, issuer: TokenIssuer
) -> None:
    admin = admin_token(issuer, WORKSPACE)
    issued = await post(
        admin_gateway,
        "/admin/tokens",
        admin,
        json_bytes(
            {
                "sub": "worker-1",
                "read": ["alpha"],
                "write": [],
                "caps": ["board_read"],
                "ttl_seconds": 60,
            }
        ),
    )
    assert issued.status_code == 200, issued.text
    for body in (
        {"id": issued.json()["id"]},
        # A subject ahead of any token of it.
        {"sub": "worker-" + uuid.uuid4().hex[:6], "force": True},
        {"token": issued.json()["token"]},
    ):
        answer = await post(admin_gateway, "/admin/revoke", admin, json_bytes(body))
        assert answer.status_code == 200, answer.text


async def test_a_body_over_the_admin_limit_is_too_large(
    admin_gateway: InProcessGateway, issuer: TokenIssuer
) -> None:
    body = json_bytes({"sub": "w", "read": ["a" * 60] * 2000})
    answer = await post(admin_gateway, "/admin/tokens", admin_token(issuer, WORKSPACE), body)
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["code"] == "too_large"


async def test_a_non_admin_or_missing_token_is_refused_before_the_body_is_read(
    admin_gateway: InProcessGateway, issuer: TokenIssuer
) -> None:
    from support import agent_token

    answer = await post(admin_gateway, "/admin/revoke", "garbage", b"{not json")
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthenticated"
    agent = agent_token(issuer, WORKSPACE, sub="plain-agent")
    answer = await post(admin_gateway, "/admin/revoke", agent, json_bytes({"sub": "w"}))
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "forbidden"
