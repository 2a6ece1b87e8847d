"""The Host check on every route, as the MCP transport does it on ``/mcp/``, and a client that
goes away mid-body answered without a traceback.

A browser page of another origin that rebinds its DNS name to the gateway's address sends
its own name as Host; refusing names the gateway does not answer to keeps such a page from
the board page and the admin API as it is kept from ``/mcp/``. The probes and metrics are
left open: a load balancer or an orchestrator asks them by address, and they tell nothing.
"""

from __future__ import annotations

import logging

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from ._json_answers import send_json

log = logging.getLogger(__name__)

# The MCP endpoint is checked by the MCP transport itself, after the bearer token.
_OPEN_PATHS = ("/healthz", "/readyz", "/metrics", "/mcp", "/mcp/")
# The OAuth metadata names the board only for a Host the same check vouches for, or from
# BB_PUBLIC_URL, and answers others with 404 itself (gateway/_oauth_metadata.py).
_OPEN_PREFIXES = ("/.well-known/",)


def host_allowed(host: str, allowed: list[str]) -> bool:
    """``host`` is one of ``allowed``, or matches an entry ``name:*`` with any port or none
    (a Host without a port names the scheme's default)."""
    for entry in allowed:
        if host == entry:
            return True
        if entry.endswith(":*") and (host.startswith(entry[:-1]) or host == entry[:-2]):
            return True
    return False


class HostCheck:
    """Refuse (421) a request whose Host the gateway does not answer to; ``allowed`` None
    when the check is off (behind a load balancer, see docs/operations.md)."""

    def __init__(self, app: ASGIApp, *, allowed: list[str] | None) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or self.allowed is None
            or path in _OPEN_PATHS
            or path.startswith(_OPEN_PREFIXES)
        ):
            await self.app(scope, receive, send)
            return
        host = ""
        for name, value in scope.get("headers", ()):
            if name == b"host":
                host = value.decode("latin-1")
                break
        if not host_allowed(host, self.allowed):
            await send_json(
                send,
                421,
                {
                    "error": {
                        "code": "forbidden",
                        "message": f"this gateway does not answer to the host {host[:100]!r}",
                        "hint": "use the address the gateway was started for, or add the "
                        "name to BB_ALLOWED_HOSTS",
                    }
                },
            )
            return
        await self.app(scope, receive, send)


class QuietDisconnects:
    """A client that closes its connection before its body has come is logged in one line,
    never as an application error with a traceback; there is nobody left to answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            if scope["type"] != "http":
                raise
            log.info("client went away before its request body came: %s", scope["path"])
