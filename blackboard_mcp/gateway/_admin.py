"""``/admin/tokens`` and ``/admin/revoke``: token issuing over HTTP, for admin tokens only."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from blackboard_mcp.auth import (
    AuditRecord,
    AuditSink,
    AuthError,
    Grant,
    RevocationList,
    TokenIssuer,
    TokenVerifier,
    issue_for_admin,
    require_admin,
)

from ._errors import tool_error

MAX_ADMIN_BODY = 16 * 1024


def _error(exc: BaseException, status: int) -> Response:
    return JSONResponse(tool_error(exc, "admin"), status_code=status)


def admin_routes(
    *,
    verifier: TokenVerifier,
    revocations: RevocationList,
    issuer: TokenIssuer | None,
    audit: AuditSink,
) -> list[Route]:
    async def authenticate(request: Request) -> Grant:
        header = request.headers.get("authorization", "")
        if not header.lower().startswith("bearer "):
            from blackboard_mcp.auth import Unauthenticated

            raise Unauthenticated("an admin access token is required")
        grant = await verifier.verify(header[7:].strip())
        if await revocations.is_revoked(grant):
            from blackboard_mcp.auth import TokenRevoked

            raise TokenRevoked("this token has been revoked")
        require_admin(grant)
        return grant

    async def body_of(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if len(raw) > MAX_ADMIN_BODY:
            raise ValueError("request body too large")
        data = orjson.loads(raw or b"{}")
        if not isinstance(data, dict):
            raise ValueError("the body must be a JSON object")
        return data

    async def issue(request: Request) -> Response:
        try:
            admin = await authenticate(request)
        except AuthError as exc:
            return _error(exc, 401 if exc.code == "unauthenticated" else 403)
        if issuer is None:
            return JSONResponse(
                {
                    "error": {
                        "code": "unavailable",
                        "message": "this gateway holds no signing key",
                        "hint": "issue tokens where the signing key is configured",
                    }
                },
                status_code=503,
            )
        try:
            data = await body_of(request)
            token, grant = issue_for_admin(
                issuer,
                admin,
                subject=str(data.get("sub", "")),
                workspace=str(data.get("workspace", admin.workspace)),
                read=list(data.get("read", [])),
                write=list(data.get("write", [])),
                capabilities=list(data.get("caps", [])),
                secrets=list(data.get("secrets", [])),
                ttl_seconds=int(data.get("ttl_seconds", 3600)),
            )
        except AuthError as exc:
            return _error(exc, 403 if exc.code == "forbidden" else 400)
        except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
            return JSONResponse(
                {
                    "error": {
                        "code": "invalid_argument",
                        "message": str(exc),
                        "hint": "send {sub, workspace, read, write, caps, ttl_seconds}",
                    }
                },
                status_code=400,
            )
        await _audit(audit, admin, "admin.issue", grant.subject)
        return JSONResponse({"token": token, "id": grant.token_id, "expires_at": grant.expires_at})

    async def revoke(request: Request) -> Response:
        try:
            admin = await authenticate(request)
        except AuthError as exc:
            return _error(exc, 401 if exc.code == "unauthenticated" else 403)
        try:
            data = await body_of(request)
        except (ValueError, orjson.JSONDecodeError) as exc:
            return JSONResponse(
                {
                    "error": {
                        "code": "invalid_argument",
                        "message": str(exc),
                        "hint": "send {id} or {sub}",
                    }
                },
                status_code=400,
            )
        if data.get("id"):
            await revocations.revoke_token(
                str(data["id"]), float(data.get("expires_at") or 0) or None
            )
            target = f"id:{data['id']}"
        elif data.get("sub"):
            await revocations.revoke_subject(str(data["sub"]))
            target = f"sub:{data['sub']}"
        else:
            return JSONResponse(
                {
                    "error": {
                        "code": "invalid_argument",
                        "message": "give id or sub",
                        "hint": "send {id} or {sub}",
                    }
                },
                status_code=400,
            )
        await _audit(audit, admin, "admin.revoke", target)
        return JSONResponse({"revoked": target})

    return [
        Route("/admin/tokens", issue, methods=["POST"]),
        Route("/admin/revoke", revoke, methods=["POST"]),
    ]


async def _audit(audit: AuditSink, admin: Grant, tool: str, target: str) -> None:
    import time

    await audit.record(
        AuditRecord(
            at=time.time(),
            workspace=admin.workspace,
            subject=admin.subject,
            tool=tool,
            addresses=(target,),
            outcome="ok",
            duration_ms=0.0,
            request_id="admin",
        )
    )
