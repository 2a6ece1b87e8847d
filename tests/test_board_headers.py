"""The security headers of the board page, its API and the admin API, each held exactly.

A browser obeys these, not the page's code: a policy that loses ``frame-ancestors 'none'``
lets another site frame the board (clickjacking an admin's revoke button), one that loses
``no-store`` leaves a token or a note in a shared cache. Through the gateway's app in process.
"""

from __future__ import annotations

from typing import Any

import httpx
from app_support import InProcessGateway
from support import admin_token

from blackboard_mcp.auth import TokenIssuer

# The response headers that tell a browser or a cache what it may do with an answer.
SECURITY = (
    "content-security-policy",
    "x-frame-options",
    "referrer-policy",
    "x-content-type-options",
    "cache-control",
)
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# The page and its files: nothing from elsewhere, never framed, no referrer, never cached.
PAGE = {
    "content-security-policy": PAGE_CSP,
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
}
# The page's API answers JSON (or an event stream) that holds notes: never cached or sniffed.
API = {"x-content-type-options": "nosniff", "cache-control": "no-store"}


def security_headers(headers: httpx.Headers) -> dict[str, str]:
    return {name: headers[name] for name in SECURITY if name in headers}


async def test_the_page_and_its_files_carry_every_security_header_exactly(
    app_gateway: InProcessGateway,
) -> None:
    http = app_gateway.http
    answers = {
        path: await http.get(path)
        for path in (
            "/board",
            "/board/static/board.js",
            "/board/static/board.css",
            "/board/static/icon.svg",
            "/board/static/missing.js",
        )
    }
    assert {path: r.status_code for path, r in answers.items()} == {
        "/board": 200,
        "/board/static/board.js": 200,
        "/board/static/board.css": 200,
        "/board/static/icon.svg": 200,
        "/board/static/missing.js": 404,
    }
    for path, response in answers.items():
        assert security_headers(response.headers) == PAGE, path
    # Each directive on its own, so that a failure names the one lost.
    directives = {
        d.strip() for d in answers["/board"].headers["content-security-policy"].split(";")
    }
    assert "frame-ancestors 'none'" in directives
    assert "default-src 'none'" in directives and "script-src 'self'" in directives


async def test_the_pages_api_answers_are_never_cached_or_sniffed(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = admin_token(issuer, workspace)
    auth = {"Authorization": f"Bearer {token}"}
    http = app_gateway.http
    answers: dict[str, tuple[int, httpx.Headers]] = {
        name: (response.status_code, response.headers)
        for name, response in {
            "topics": await http.get("/board/api/topics", headers=auth),
            "activity": await http.get("/board/api/activity", headers=auth),
            "audit": await http.get("/board/api/audit", headers=auth),
            "a read": await http.post(
                "/board/api/call", json={"tool": "list_keys", "arguments": {}}, headers=auth
            ),
            "a refused call": await http.post(
                "/board/api/call", json={"tool": "update_state", "arguments": {}}, headers=auth
            ),
        }.items()
    }
    # The feed never ends: its head is what a browser acts on.
    answers["the change feed"] = await app_gateway.response_head("/board/api/events", auth)
    statuses = {name: status for name, (status, _) in answers.items()}
    assert statuses == {name: 400 if name == "a refused call" else 200 for name in answers}
    for name, (_, headers) in answers.items():
        assert security_headers(headers) == API, name


ADMIN_CALLS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/admin/tokens", {"sub": "scout", "read": ["facts"], "caps": ["board_read"]}),
    ("GET", "/admin/tokens", None),
    ("GET", "/admin/retention", None),
    ("POST", "/admin/revoke", {"sub": "nobody"}),  # refused: not on record
]


async def test_the_admin_apis_answers_are_never_cached_or_sniffed(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    auth = {"Authorization": f"Bearer {admin_token(issuer, workspace)}"}
    for method, path, body in ADMIN_CALLS:
        response = await app_gateway.http.request(method, path, json=body, headers=auth)
        assert security_headers(response.headers) == API, (method, path, response.status_code)
