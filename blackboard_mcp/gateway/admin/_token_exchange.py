"""``POST /oauth/token``: token exchange (RFC 8693), so that a holder narrows its own token.

The request is a form (RFC 6749 section 3.2): ``grant_type`` the token-exchange URN,
``subject_token`` the caller's token, ``subject_token_type`` the access-token URN, and
optionally ``scope`` (auth/_delegation.py gives its words) and ``expires_in`` (seconds; cut
to the subject token's own expiry). The answer is the RFC's JSON, never cached; a refusal is
``{"error", "error_description"}`` with the RFC's codes (``invalid_scope`` for anything
beyond the subject token). The subject token pays for the exchange like a tool call (its
rate limit, its revocation), and the delegation is audited as ``token.delegate``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from blackboard_mcp.auth import (
    AuditSink,
    AuthError,
    DelegationRefused,
    Grant,
    TokenInventory,
    TokenIssuer,
    TokenVerifier,
    Unauthenticated,
    check_delegation,
    delegated_ttl,
    issue_recorded,
    parse_scope,
)
from blackboard_mcp.errors import BoardError
from blackboard_mcp.store import RedisCallAdmission

from ._audit import audit_admin_action
from ._bodies import read_body

PATH = "/oauth/token"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
_NO_STORE = {"cache-control": "no-store", "pragma": "no-cache"}


def _refusal(error: str, description: str, status: int = 400, **headers: str) -> Response:
    return JSONResponse(
        {"error": error, "error_description": description},
        status_code=status,
        headers={**_NO_STORE, **headers},
    )


def token_exchange_routes(
    *,
    verifier: TokenVerifier,
    admission: RedisCallAdmission,
    issuer: TokenIssuer | None,
    inventory: TokenInventory,
    audit: AuditSink,
    clock: Callable[[], float] = time.time,
) -> list[Route]:
    async def exchange(request: Request) -> Response:
        if "application/x-www-form-urlencoded" not in request.headers.get("content-type", ""):
            return _refusal("invalid_request", "send the request as a form (RFC 6749 3.2)")
        try:
            form = dict(parse_qsl((await read_body(request)).decode(), keep_blank_values=True))
        except (BoardError, UnicodeDecodeError):
            return _refusal("invalid_request", "the form is too large or not UTF-8")
        if form.get("grant_type") != EXCHANGE:
            return _refusal("unsupported_grant_type", f"this endpoint grants only {EXCHANGE}")
        if form.get("subject_token_type") != ACCESS_TOKEN:
            return _refusal("invalid_request", f"subject_token_type must be {ACCESS_TOKEN}")
        if "requested_token_type" in form and form["requested_token_type"] != ACCESS_TOKEN:
            return _refusal("invalid_request", f"only {ACCESS_TOKEN} is issued")
        if issuer is None:
            return _refusal("temporarily_unavailable", "this gateway holds no signing key", 503)
        try:
            parent = await _subject_grant(form.get("subject_token", ""))
        except AuthError as exc:
            return _refusal("invalid_request", f"subject_token: {exc.message}")
        try:
            verdict = await admission.admit(parent)
        except BoardError as exc:
            return _refusal("temporarily_unavailable", exc.message, 503)
        if verdict.revoked:
            return _refusal("invalid_request", "subject_token: this token has been revoked")
        if verdict.retry_after is not None:
            return _refusal(
                "invalid_request",
                f"rate limit reached for {parent.subject}",
                429,
                **{"retry-after": str(math.ceil(verdict.retry_after))},
            )
        try:
            wanted = parse_scope(form.get("scope"), parent)
            check_delegation(parent, wanted)
            ttl = delegated_ttl(parent, _seconds(form.get("expires_in")), clock())
            token, child = await issue_recorded(
                issuer,
                inventory,
                subject=parent.subject,
                workspace=parent.workspace,
                read=wanted.read,
                write=wanted.write,
                capabilities=wanted.capabilities,
                secrets=wanted.secrets,
                ttl_seconds=ttl,
                issued_by=f"{parent.subject} (delegated)",
                parent=parent,
            )
        except DelegationRefused as exc:
            return _refusal(exc.oauth_error, exc.message)
        except AuthError as exc:
            return _refusal("invalid_scope", exc.message)
        except BoardError as exc:
            return _refusal("temporarily_unavailable", exc.message, 503)
        await audit_admin_action(
            audit,
            parent,
            "token.delegate",
            f"id:{parent.token_id} -> id:{child.token_id} ({wanted.scope()})",
        )
        return JSONResponse(
            {
                "access_token": token,
                "issued_token_type": ACCESS_TOKEN,
                "token_type": "Bearer",
                "expires_in": int(child.expires_at - child.issued_at),
                "scope": wanted.scope(),
            },
            headers=_NO_STORE,
        )

    async def _subject_grant(token: str) -> Grant:
        if not token:
            raise Unauthenticated("missing")
        grant = verifier.decode(token)  # the board's own tokens only, never an IdP's
        return grant

    return [Route(PATH, exchange, methods=["POST"])]


def _seconds(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 12:
        raise DelegationRefused("expires_in must be a whole number of seconds")
    return int(value)
