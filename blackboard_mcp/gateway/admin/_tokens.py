"""``/admin/tokens`` and ``/admin/revoke``: token issuing and revocation over HTTP, for admins
(``/admin/delete`` and ``/admin/retention`` are in _lifecycle.py).

An admin acts within its own workspace only: it issues tokens for it, and it revokes among
its tokens (a token id or a subject names a token of the admin's workspace, a presented
token must be one). Every answer is JSON: an error is ``{"error": {code, message, hint}}``
with the HTTP status of its code, never a stack trace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from blackboard_mcp.auth import (
    AuditSink,
    Grant,
    NotAdmin,
    RevocationList,
    Revoker,
    TokenExpired,
    TokenInventory,
    TokenIssuer,
    TokenRevoked,
    TokenVerifier,
    Unauthenticated,
    check_admin_grant,
    is_subject,
    issue_recorded,
    require_admin,
)
from blackboard_mcp.store import Board

from .._errors import GatewayError, tool_error
from .._oauth_metadata import ProtectedResource
from ._audit import audit_admin_action
from ._bodies import (
    IssueBody,
    RevokeBody,
    TokenExpiredAlready,
    TokenNotRevocable,
    parse_body,
)
from ._lifecycle import lifecycle_routes
from ._openapi import openapi_routes

_STATUS = {
    "invalid_argument": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "too_large": 413,
    "rate_limited": 429,
    "unavailable": 503,
}


class NoSigningKey(GatewayError):
    """This gateway verifies tokens but holds no key to sign new ones."""

    code = "unavailable"
    hint = "issue tokens where the signing key is configured"


class InvalidTokenQuery(GatewayError):
    """The query of ``GET /admin/tokens`` is not ``sub`` alone, or names no valid subject."""

    hint = "GET /admin/tokens lists every token; ?sub=NAME, only that subject's"


Handler = Callable[[Request], Awaitable[Response]]


# Every admin answer: an issued token or a workspace's token list must not stay in a cache,
# and JSON is never to be read as anything else.
_NO_STORE = {"cache-control": "no-store", "x-content-type-options": "nosniff"}


def _answering_errors(handler: Handler, resource: ProtectedResource) -> Handler:
    async def endpoint(request: Request) -> Response:
        try:
            response = await handler(request)
        except Exception as exc:  # every failure is answered in the error shape
            body = tool_error(exc, "admin")
            status = _STATUS.get(body["error"]["code"], 500)
            response = JSONResponse(
                body, status_code=status, headers=_challenge(resource, request, exc)
            )
        response.headers.update(_NO_STORE)
        return response

    return endpoint


def _challenge(resource: ProtectedResource, request: Request, exc: Exception) -> dict[str, str]:
    """RFC 6750 section 3: a 401 says how to authenticate, a 403 for want of the admin
    capability says which scope (``bb:admin``) a token needs."""
    if isinstance(exc, Unauthenticated):
        sent = request.headers.get("authorization") is not None
        value = resource.challenge(
            request.scope,
            error="invalid_token" if sent else None,
            description=exc.message if sent else None,
        )
    elif isinstance(exc, NotAdmin):
        value = resource.challenge(
            request.scope,
            error="insufficient_scope",
            description=exc.message,
            needed_scope="bb:admin",
        )
    else:
        return {}
    return {"www-authenticate": value}


def admin_routes(
    *,
    verifier: TokenVerifier,
    revocations: RevocationList,
    revoker: Revoker,
    issuer: TokenIssuer | None,
    inventory: TokenInventory,
    audit: AuditSink,
    resource: ProtectedResource,
    board: Board,
) -> list[Route]:
    async def authenticate(request: Request) -> Grant:
        header = request.headers.get("authorization", "")
        if not header.lower().startswith("bearer "):
            raise Unauthenticated("an admin access token is required")
        grant = await verifier.verify(header[7:].strip())
        if await revocations.is_revoked(grant):
            raise TokenRevoked("this token has been revoked")
        require_admin(grant)
        return grant

    async def issue(request: Request) -> Response:
        admin = await authenticate(request)
        if issuer is None:
            raise NoSigningKey("this gateway holds no signing key")
        body = await parse_body(request, IssueBody)
        workspace = admin.workspace if body.workspace is None else body.workspace
        # Every check first (the admin's own bounds among them), then signed and recorded.
        check_admin_grant(
            issuer,
            admin,
            subject=body.sub,
            workspace=workspace,
            read=list(body.read),
            write=list(body.write),
            capabilities=list(body.caps),
            secrets=list(body.secrets),
            ttl_seconds=body.ttl_seconds,
        )
        token, grant = await issue_recorded(
            issuer,
            inventory,
            subject=body.sub,
            workspace=workspace,
            read=body.read,
            write=body.write,
            capabilities=body.caps,
            secrets=body.secrets,
            ttl_seconds=body.ttl_seconds,
            issued_by=admin.subject,
        )
        await audit_admin_action(
            audit, admin, "admin.issue", f"sub:{grant.subject} id:{grant.token_id}"
        )
        return JSONResponse({"token": token, "id": grant.token_id, "expires_at": grant.expires_at})

    async def tokens(request: Request) -> Response:
        admin = await authenticate(request)
        asked = request.query_params.multi_items()
        unknown = sorted({name for name, _ in asked} - {"sub"})
        if unknown or len(asked) > 1:
            raise InvalidTokenQuery(
                f"unknown or repeated query parameters: {', '.join(unknown) or 'sub'}"[:200]
            )
        subject = request.query_params.get("sub")
        if subject is not None and not is_subject(subject):
            raise InvalidTokenQuery(f"sub {subject[:64]!r} is not a valid subject name")
        listed = await inventory.listing(admin.workspace, subject=subject)
        return JSONResponse(
            {"workspace": admin.workspace, "tokens": [t.describe() for t in listed]}
        )

    async def revoke(request: Request) -> Response:
        admin = await authenticate(request)
        body = await parse_body(request, RevokeBody)
        if body.token is not None:
            try:
                presented = await verifier.check(body.token)
            except TokenExpired:
                raise TokenExpiredAlready(
                    "the token to revoke has expired already: no gateway accepts it"
                ) from None
            except Unauthenticated as exc:
                raise TokenNotRevocable(
                    f"the token to revoke is not one this board accepts: {exc.message}"
                ) from None
            target = await revoker.revoke_presented(presented, workspace=admin.workspace)
        elif body.id is not None:
            target = await revoker.revoke_token_id(admin.workspace, body.id, force=body.force)
        else:
            assert body.sub is not None  # the model admits exactly one target
            target = await revoker.revoke_subject(admin.workspace, body.sub, force=body.force)
        await audit_admin_action(audit, admin, "admin.revoke", target)
        return JSONResponse({"revoked": target, "workspace": admin.workspace})

    return [
        Route("/admin/tokens", _answering_errors(issue, resource), methods=["POST"]),
        Route("/admin/tokens", _answering_errors(tokens, resource), methods=["GET"]),
        Route("/admin/revoke", _answering_errors(revoke, resource), methods=["POST"]),
        *lifecycle_routes(
            authenticate=authenticate,
            board=board,
            audit=audit,
            wrap=lambda handler: _answering_errors(handler, resource),
        ),
        *openapi_routes(max_ttl_seconds=None if issuer is None else issuer.max_ttl_seconds),
    ]
