"""The HTTP edge in front of ``/mcp/``: routing, request ids, body size cap, bearer tokens.

Pure ASGI middleware rather than Starlette's BaseHTTPMiddleware, which would buffer the
streamed MCP responses.
"""

from __future__ import annotations

import logging
import random
from typing import Any, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blackboard_mcp.auth import AuthError, TokenVerifier

from ._context import current_grant, current_request_id
from ._json_answers import send_json
from ._oauth_metadata import ProtectedResource

log = logging.getLogger(__name__)


class Refusal(Protocol):
    """The body of a refusal the edge answers itself, from the board's error fields."""

    def __call__(self, code: str, message: str, hint: str, **details: Any) -> dict[str, Any]: ...


def plain_refusal(code: str, message: str, hint: str, **details: Any) -> dict[str, Any]:
    """The board's error shape, as every HTTP API of the board answers."""
    return {"error": {"code": code, "message": message, "hint": hint, **details}}


# JSON-RPC's "Invalid Request": what a refusal before MCP is to a JSON-RPC client.
_REFUSED_REQUEST = -32600


def jsonrpc_refusal(code: str, message: str, hint: str, **details: Any) -> dict[str, Any]:
    """A refusal at the MCP endpoint, before MCP: a JSON-RPC error (the request's id unread),
    so that an MCP client shows its message to the person rather than a bare HTTP status;
    the board's code, hint and details are in ``data`` for an HTTP caller."""
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": _REFUSED_REQUEST,
            "message": f"{message} ({hint})",
            "data": {"code": code, "message": message, "hint": hint, **details},
        },
    }


class McpEndpointFirst:
    """Hand ``/mcp`` and ``/mcp/`` to the MCP app before Starlette's router and exception layer.

    Every tool call comes this way, so it skips route matching and the per-request
    exception wrappers it does not need (the edge answers its own errors; anything that
    escapes still meets Starlette's outermost error middleware). Both spellings, so that a
    client using ``/mcp`` does not pay a 307 round trip.
    """

    def __init__(self, app: ASGIApp, *, mcp_app: ASGIApp) -> None:
        self.app = app
        self.mcp_app = mcp_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in ("/mcp", "/mcp/"):
            await self.mcp_app(scope, receive, send)
            return
        await self.app(scope, receive, send)


class PostOnly:
    """Answer GET and DELETE on the MCP endpoint with 405, as the transport allows.

    The gateway keeps no sessions, so it has no server-initiated messages to stream and no
    session to delete. Left to the SDK, a GET opened an event stream that stayed idle for
    the client's whole life, one held connection per client.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "DELETE"):
            await send_json(
                send,
                405,
                {
                    "error": {
                        "code": "method_not_allowed",
                        "message": "this endpoint keeps no sessions: POST requests only",
                        "hint": "send JSON-RPC requests with POST",
                    }
                },
                [(b"allow", b"POST")],
            )
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` before anything parses them."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, shape: Refusal = plain_refusal) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.shape = shape

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared: int | None = None
        chunked = False
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit():
                declared = int(value)
                if declared > self.max_bytes:
                    await send_json(send, 413, self._too_large())
                    return
            elif name == b"transfer-encoding":
                chunked = True
        if declared is not None and not chunked:
            # The server frames the body by its declared length, which is within the limit:
            # counting it again would cost every call a wrapper around receive().
            await self.app(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _BodyTooLarge:
            await send_json(send, 413, self._too_large())

    def _too_large(self) -> dict[str, Any]:
        return self.shape(
            "too_large",
            f"request body over {self.max_bytes} bytes",
            "send less per call, or use source_path for files",
            limit=self.max_bytes,
        )


class _BodyTooLarge(Exception):
    pass


class BearerAuth:
    """Verify the caller's JWT once per request and make its grant visible to the tools.

    A refusal is a 401 whose challenge names the resource metadata (RFC 9728 section 5.1),
    so a client can find the identity provider to get a token from; a token that cannot
    be judged because its issuer's keys are out of reach is a 503, not a 401, since
    asking the user to sign in again would not help.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        verifier: TokenVerifier,
        resource: ProtectedResource,
        shape: Refusal = plain_refusal,
    ) -> None:
        self.app = app
        self.verifier = verifier
        self.resource = resource
        self.shape = shape

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id: str | None = None
        authorization: str | None = None
        for key, value in scope.get("headers", ()):
            if key == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
            elif key == b"x-request-id" and request_id is None:
                request_id = value.decode("latin-1")[:64]
        # Only for correlating logs and audit (a client may choose its own), so no secret:
        # random's generator is reseeded in forked workers and costs no system call.
        request_id = request_id or f"{random.getrandbits(64):016x}"
        current_request_id.set(request_id)
        token = _bearer(authorization)
        if token is None:
            await self._refuse(
                send,
                "unauthenticated",
                "an access token is required",
                self.resource.challenge(scope),
            )
            return
        try:
            grant = await self.verifier.verify(token)
        except AuthError as exc:
            log.info("refused token for request %s: %s", request_id, exc.code)
            if exc.code == "unavailable":
                await send_json(
                    send, 503, self.shape(exc.code, str(exc), exc.hint), [(b"retry-after", b"5")]
                )
                return
            challenge = self.resource.challenge(scope, error="invalid_token", description=str(exc))
            await self._refuse(send, exc.code, str(exc), challenge)
            return
        reset = current_grant.set(grant)
        try:
            await self.app(scope, receive, send)
        finally:
            current_grant.reset(reset)

    async def _refuse(self, send: Send, code: str, message: str, challenge: str) -> None:
        await send_json(
            send,
            401,
            self.shape(
                "unauthenticated",
                message,
                "ask the board's admin or your identity provider for a valid token",
                reason=code,
            ),
            # Closed after the answer: a caller without a valid token holds no connection,
            # however much body it announced and trickles.
            [(b"www-authenticate", challenge.encode("latin-1")), (b"connection", b"close")],
        )


def _bearer(value: str | None) -> str | None:
    if value is None or not value.lower().startswith("bearer "):
        return None
    token = value[7:].strip()
    return token or None
