"""This board as an OAuth 2.0 protected resource: its identifier, its RFC 9728 metadata,
and the ``WWW-Authenticate`` challenges (RFC 6750) that point clients to that metadata.

The resource identifier is ``<BB_PUBLIC_URL>/mcp``. Without BB_PUBLIC_URL it is derived
from the request's Host header, but only when that host is one the DNS-rebinding check
accepts anyway (BB_ALLOWED_HOSTS, or loopback when bound to loopback): a spoofed Host must
not be able to put an attacker's URL into the metadata or the challenges. Any other Host
gets no metadata (404) and challenges without ``resource_metadata``. External tokens are
never checked against a derived identifier: they need BB_PUBLIC_URL (see settings.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mcp.shared.auth import ProtectedResourceMetadata
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Scope

WELL_KNOWN = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"
# RFC 6750 section 3: error_description and scope are quoted strings of these characters
# only (no quote, no backslash); anything else in a message is replaced.
_UNQUOTABLE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")
_HOST = re.compile(r"[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]")
_PORT = re.compile(r":[0-9]{1,5}")


class ProtectedResource:
    def __init__(
        self,
        *,
        public_url: str | None,
        allowed_hosts: Sequence[str],
        authorization_servers: Sequence[str],
        scopes_supported: Sequence[str],
        realm: str = "blackboard-mcp",
    ) -> None:
        self._public_url = public_url
        self._allowed_hosts = list(allowed_hosts)
        self._servers = list(authorization_servers)
        self._scopes = list(scopes_supported)
        self.realm = realm

    def base_url(self, scope: Scope) -> str | None:
        """The board's external base URL for this request, or None when it cannot be known."""
        if self._public_url is not None:
            return self._public_url
        host = _host_header(scope)
        if host is None or not self._host_allowed(host):
            return None
        scheme = "https" if scope.get("scheme") == "https" else "http"
        return f"{scheme}://{host}"

    def metadata_url(self, scope: Scope) -> str | None:
        base = self.base_url(scope)
        return None if base is None else f"{base}{WELL_KNOWN}{MCP_PATH}"

    def challenge(
        self,
        scope: Scope,
        *,
        error: str | None = None,
        description: str | None = None,
        needed_scope: str | None = None,
    ) -> str:
        """A ``WWW-Authenticate: Bearer`` value: no ``error`` when no token was sent."""
        params = [f'realm="{self.realm}"']
        metadata = self.metadata_url(scope)
        if metadata is not None:
            params.append(f'resource_metadata="{metadata}"')
        if error is not None:
            params.append(f'error="{error}"')
        if description:
            params.append(f'error_description="{_quotable(description)}"')
        if needed_scope:
            params.append(f'scope="{_quotable(needed_scope)}"')
        return "Bearer " + ", ".join(params)

    def metadata(self, scope: Scope) -> dict[str, Any] | None:
        base = self.base_url(scope)
        if base is None:
            return None
        resource = base + MCP_PATH
        if not self._servers:
            # Only the board's own tokens: there is no authorization server to name, and
            # scopes mean nothing to them. RFC 9728 makes both fields optional.
            return {
                "resource": resource,
                "bearer_methods_supported": ["header"],
                "resource_name": self.realm,
            }
        document = ProtectedResourceMetadata.model_validate(
            {
                "resource": resource,
                "authorization_servers": self._servers,
                "scopes_supported": self._scopes,
                "bearer_methods_supported": ["header"],
                "resource_name": self.realm,
            }
        )
        return document.model_dump(mode="json", exclude_none=True)

    def routes(self) -> list[Route]:
        async def endpoint(request: Request) -> Response:
            document = self.metadata(request.scope)
            if document is None:
                return JSONResponse(
                    {
                        "error": {
                            "code": "not_found",
                            "message": "this board's public URL is not known for this host",
                            "hint": "set BB_PUBLIC_URL (or list this host in BB_ALLOWED_HOSTS)",
                        }
                    },
                    status_code=404,
                )
            # A configured URL is the same for everyone; a derived one depends on Host.
            cache = "public, max-age=3600" if self._public_url else "no-store"
            return JSONResponse(document, headers={"cache-control": cache})

        # The path-specific location of RFC 9728 section 3.1 for <base>/mcp, and the root one
        # that MCP clients fall back to.
        return [
            Route(WELL_KNOWN + MCP_PATH, endpoint, methods=["GET"]),
            Route(WELL_KNOWN, endpoint, methods=["GET"]),
        ]

    def _host_allowed(self, host: str) -> bool:
        if host.startswith("["):
            end = host.find("]") + 1
            name, rest = host[:end], host[end:]
        else:
            name, colon, port_text = host.partition(":")
            rest = colon + port_text
        if rest and not (_PORT.fullmatch(rest) and 0 < int(rest[1:]) <= 65535):
            return False
        if not _HOST.fullmatch(name):
            return False
        for allowed in self._allowed_hosts:
            if allowed == host:
                return True
            if allowed.endswith(":*") and rest and allowed[:-2] == name:
                return True
        return False


def _host_header(scope: Scope) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == b"host":
            return str(value.decode("latin-1"))
    return None


def _quotable(text: str) -> str:
    return _UNQUOTABLE.sub("?", text)[:200]
