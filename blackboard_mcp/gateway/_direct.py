"""``tools/call`` without the SDK's per-request machinery, for the calls it would answer plainly.

For every POST the SDK builds a Request, pydantic models of the JSON-RPC envelope and of
the call's parameters, a server kernel with its middleware chain and, for handshake-era
clients, a whole transport with memory streams and a task of its own; then it validates
the tool's result against the protocol's models and dumps it twice. Per call that costs
more than the store's own work (bench/RESULTS.md).

Here a ``tools/call`` POST that passes the SDK's own checks (transport security, Accept,
the 2026-07-28 envelope ladder, the call's parameter surface for its protocol version) goes
straight to the ToolCaller, and its result is written once, in the shape the SDK gives it.
Everything else (initialize, tools/list, ping, notifications, batches, anything malformed,
unusual or new) goes to the SDK untouched. tests/test_direct_calls.py holds the two paths
to the same answers; ``BB_DIRECT_TOOL_CALLS=false`` sends every request through the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types import DEFAULT_NEGOTIATED_VERSION, SERVER_INFO_META_KEY
from mcp_types import methods as protocol_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._calls import ToolCaller
from ._context import current_grant, current_request_id
from ._metrics import GatewayMetrics
from ._schemas import HEADER_SCHEMAS

log = logging.getLogger(__name__)

_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})
_VERSION_HEADER = b"mcp-protocol-version"
# JSON numbers every client reads back exactly; a larger id goes the SDK's way.
_MAX_ID = 2**53


@dataclass(frozen=True)
class _Call:
    request_id: int | str
    tool: str
    arguments: Mapping[str, Any]
    modern: bool


class DirectToolCalls:
    """ASGI app in front of the SDK's: answers plain tool calls itself, hands it the rest."""

    def __init__(
        self,
        sdk_app: ASGIApp,
        *,
        caller: ToolCaller,
        server: Server[Any],
        security: TransportSecuritySettings | None,
        metrics: GatewayMetrics,
    ) -> None:
        self._sdk_app = sdk_app
        self._caller = caller
        self._metrics = metrics
        self._security = TransportSecurityMiddleware(security)
        self._usable = _server_is_plain(server)
        # Fixed for the server's life; serialised straight away, so never aliased.
        self._server_info = server.server_info_stamp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._usable or scope["type"] != "http" or scope["method"] != "POST":
            await self._sdk_app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return  # the client left before its request was complete; nobody to answer
        call = await self._plain_call(scope, body)
        if call is None:
            await self._sdk_app(scope, _replay(body, receive), send)
            return
        self._metrics.direct_calls.inc()
        outcome = await self._caller.call(
            call.tool, call.arguments, current_grant.get(), current_request_id.get()
        )
        result = outcome.wire()
        if call.modern:
            result["resultType"] = "complete"
            result["_meta"] = {SERVER_INFO_META_KEY: self._server_info}
        payload = orjson.dumps({"jsonrpc": "2.0", "id": call.request_id, "result": result})
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def _plain_call(self, scope: Scope, body: bytes) -> _Call | None:
        """The call if the SDK would serve this request as a plain ``tools/call``, else None.

        Each check is the SDK's own, or stricter; a request failing one goes to the SDK,
        which then answers it (with its error, or by serving it) exactly as before.
        """
        request = Request(scope)
        if await self._security.validate_request(request, is_post=True) is not None:
            return None
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip() != "application/json":
            return None
        if not check_accept_headers(request)[0]:
            return None
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not (
            isinstance(message, dict)
            and message.keys() == _ENVELOPE_KEYS
            and message["jsonrpc"] == "2.0"
            and message["method"] == "tools/call"
        ):
            return None
        request_id = message["id"]
        if not (type(request_id) is str or (type(request_id) is int and abs(request_id) < _MAX_ID)):
            return None
        params = message["params"]
        if not isinstance(params, dict) or not params.keys() <= _PARAM_KEYS:
            return None
        tool, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(tool, str) or not isinstance(arguments, dict):
            return None
        version = _protocol_version(scope, message, request)
        if version is None:
            return None
        try:
            protocol_methods.validate_client_request("tools/call", version, params)
        except (KeyError, ValueError, ValidationError):
            return None
        modern = version in MODERN_PROTOCOL_VERSIONS
        schema = HEADER_SCHEMAS.get(tool)
        if (
            modern
            and schema is not None
            and validate_mcp_param_headers(schema, arguments, request.headers) is not None
        ):
            return None
        return _Call(request_id, tool, arguments, modern)


def _protocol_version(scope: Scope, message: dict[str, Any], request: Request) -> str | None:
    """The protocol version the SDK would serve this request at, or None to leave it to it."""
    values = [v for k, v in scope["headers"] if k == _VERSION_HEADER]
    if len(values) > 1:
        return None
    if not values:
        # Handshake era without the header: the SDK assumes the spec's default version.
        return DEFAULT_NEGOTIATED_VERSION
    header = str(values[0].decode("latin-1"))
    if header in HANDSHAKE_PROTOCOL_VERSIONS:
        return header
    if header not in MODERN_PROTOCOL_VERSIONS:
        return None
    if find_duplicated_routing_header(request.headers.items()) is not None:
        return None
    route = classify_inbound_request(message, headers=dict(request.headers))
    if not isinstance(route, InboundModernRoute):
        return None
    return str(route.protocol_version)


def _server_is_plain(server: Server[Any]) -> bool:
    """Whether a tools/call result on this server is just the handler's result, reshaped.

    A server middleware other than the SDK's own tracing one, or a cache hint on
    tools/call, would change what the SDK answers; then every call goes through the SDK.
    """
    plain = all(type(m).__name__ == "OpenTelemetryMiddleware" for m in server.middleware)
    if not plain or server.cache_hints.get("tools/call") is not None:
        log.warning("tool calls go through the SDK: the server has middleware or cache hints")
        return False
    return True


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the already-read body first, then whatever follows."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
