"""What the board answers for a path it does not serve: JSON, never plain text.

An MCP client that gets a 401 starts OAuth discovery (mcp-remote, the Inspector): it asks
the board for authorization-server metadata and to register itself, and reads each answer
as an OAuth error object. A board signs its own tokens, or takes an identity provider's;
it is never the authorization server itself. A plain "Not Found" there made those clients
fail with a JSON parse error that said nothing of the token they had sent. These paths answer
an OAuth error object saying where tokens come from; every other unknown path answers the
board's own error shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

# Characters of an unknown path said back in the answer.
_SHOWN = 200

# Where OAuth clients look for an authorization server, under the resource's origin.
OAUTH_PATHS = (
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
    "/register",
    "/authorize",
    "/token",
)


class NotFound:
    """Starlette's handler for 404 and 405, built with the identity providers the board trusts."""

    def __init__(self, identity_providers: Sequence[str]) -> None:
        if identity_providers:
            where = "from its identity provider: " + ", ".join(identity_providers)
        else:
            where = "from the board's admin (blackboard-mcp token issue, or POST /admin/tokens)"
        self._oauth = {
            "error": "invalid_token",
            "error_description": (
                "this board is not an authorization server, and the bearer token sent was "
                f"refused (missing, expired, revoked or not this board's): get a valid token "
                f"{where}, and send it as Authorization: Bearer <token>"
            ),
        }

    async def __call__(self, request: Request, exc: Exception) -> JSONResponse:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        path = request.url.path
        if status == 404 and any(path == p or path.startswith(p + "/") for p in OAUTH_PATHS):
            return JSONResponse(self._oauth, status_code=404)
        error = {
            "code": "not_found",
            # The path as asked, cut short: it is the caller's text, told back.
            "message": f"this board serves no {request.method[:16]} {path[:_SHOWN]}",
            "hint": "the MCP endpoint is /mcp/ (POST); see also /board, /healthz and /readyz",
        }
        headers = getattr(exc, "headers", None)
        return JSONResponse({"error": error}, status_code=status, headers=headers)
