"""``tools/call`` without the SDK's per-request machinery, for the calls it would answer plainly.

For every POST the SDK builds a Request, pydantic models of the JSON-RPC envelope and of
the call's parameters, a server kernel with its middleware chain and, for handshake-era
clients, a whole transport with memory streams and a task of its own; then it validates
the tool's result against the protocol's models and dumps it twice. Per call that costs
more than the store's own work (bench/RESULTS.md).

Here a ``tools/call`` POST that passes the SDK's own checks (transport security, Accept,
the 2026-07-28 envelope ladder, the call's parameter surface for its protocol version, all
taken from gateway/_mcp_sdk_adapter.py) goes
straight to the ToolCaller, and its result is written once, in the shape the SDK gives it.
A ``subscriptions/listen`` at a 2026-07-28 version that passes the same checks is streamed
by listening/_stream.py. Everything else (initialize, tools/list, ping, notifications, batches,
anything malformed, unusual or new) goes to the SDK untouched. tests/test_direct_calls.py
holds the two paths to the same answers; ``BB_DIRECT_TOOL_CALLS=false`` sends every
request through the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import SubscriptionsListenRequestParams
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._calls import ToolCaller
from ._context import current_grant, current_request_id
from ._json_answers import send_json_bytes
from ._mcp_sdk_adapter import (
    DEFAULT_NEGOTIATED_VERSION,
    HANDSHAKE_PROTOCOL_VERSIONS,
    MODERN_PROTOCOL_VERSIONS,
    SERVER_INFO_META_KEY,
    InboundModernRoute,
    TransportSecurityMiddleware,
    check_accept_headers,
    classify_inbound_request,
    find_duplicated_routing_header,
    is_sdk_tracing,
    protocol_methods,
    validate_mcp_param_headers,
)
from ._metrics import GatewayMetrics
from ._schemas import HEADER_SCHEMAS
from ._tools import TOOLS_BY_NAME as TOOLS
from .listening import DirectListen

log = logging.getLogger(__name__)

_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})
_LISTEN = "subscriptions/listen"
_VERSION_HEADER = b"mcp-protocol-version"
# What the SDK's transport security and Accept checks read, and our content type check.
_CHECKED = (b"content-type", b"accept", b"host", b"origin")
_READ = frozenset((*_CHECKED, _VERSION_HEADER))
# Distinct header combinations whose verdict is kept; a client sends one or two.
_MAX_VERDICTS = 256
# JSON numbers every client reads back exactly; a larger id goes the SDK's way.
_MAX_ID = 2**53


@dataclass(frozen=True)
class _Call:
    request_id: int | str
    tool: str
    arguments: Mapping[str, Any]
    modern: bool


@dataclass(frozen=True)
class _Listen:
    request_id: int | str
    uris: list[str]
    tools_list_changed: bool = False
    resources_list_changed: bool = False


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
        listen: DirectListen | None = None,
    ) -> None:
        self._sdk_app = sdk_app
        self._caller = caller
        self._metrics = metrics
        self._security = TransportSecurityMiddleware(security)
        self._listen = listen
        self._verdicts: dict[tuple[bytes | None, ...], tuple[bool, bool]] = {}
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
        call = await self._plain_request(scope, body)
        if call is None:
            await self._sdk_app(scope, _replay(body, receive), send)
            return
        if isinstance(call, _Listen):
            assert self._listen is not None  # never recognised otherwise
            self._metrics.direct_listens.inc()
            await self._listen.serve(
                call.request_id,
                call.uris,
                receive,
                send,
                tools_list_changed=call.tools_list_changed,
                resources_list_changed=call.resources_list_changed,
            )
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
        await send_json_bytes(send, payload)

    async def _plain_request(self, scope: Scope, body: bytes) -> _Call | _Listen | None:
        """The call if the SDK would serve this request as a plain ``tools/call`` (or a
        ``subscriptions/listen``), else None.

        Each check is the SDK's own, or stricter; a request failing one goes to the SDK,
        which then answers it (with its error, or by serving it) exactly as before.
        """
        found, versions = _first_values(scope)
        passes, streams = await self._headers_pass(scope, found)
        if not passes:
            return None
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not (
            isinstance(message, dict)
            and message.keys() == _ENVELOPE_KEYS
            and message["jsonrpc"] == "2.0"
        ):
            return None
        request_id = message["id"]
        if not (type(request_id) is str or (type(request_id) is int and abs(request_id) < _MAX_ID)):
            return None
        if message["method"] == _LISTEN:
            if self._listen is None or not streams or versions != 1:
                return None
            return _modern_listen(scope, message, request_id)
        if message["method"] != "tools/call":
            return None
        params = message["params"]
        if not isinstance(params, dict) or not params.keys() <= _PARAM_KEYS:
            return None
        tool, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(tool, str) or not isinstance(arguments, dict) or tool not in TOOLS:
            # An unknown tool is a JSON-RPC error (-32602), as the SDK path answers it.
            return None
        header = found.get(_VERSION_HEADER)
        if versions > 1:
            return None
        if header is None:
            # Handshake era without the header: the SDK assumes the spec's default version.
            version = DEFAULT_NEGOTIATED_VERSION
        else:
            version = header.decode("latin-1")
            if version in MODERN_PROTOCOL_VERSIONS:
                return _modern_call(scope, message, request_id, tool, arguments)
            if version not in HANDSHAKE_PROTOCOL_VERSIONS:
                return None
        if "_meta" in params:
            # Without ``_meta`` the handshake versions' params model cannot refuse what
            # passed the checks above (a str name, an object of arguments): pydantic's
            # validation would be pure cost (test_direct_calls.py proves it for each
            # version). With it, its fields are the SDK's to judge.
            try:
                protocol_methods.validate_client_request("tools/call", version, params)
            except (KeyError, ValueError, ValidationError):
                return None
        return _Call(request_id, tool, arguments, modern=False)

    async def _headers_pass(self, scope: Scope, found: dict[bytes, bytes]) -> tuple[bool, bool]:
        """Whether the headers pass the SDK's transport security and Accept checks, and ours
        on the content type; and whether they accept an event stream.

        Each check reads only the first value of the headers in the key, so its verdict is
        memoised by them: clients send the same few combinations on every call, and the
        SDK's checks otherwise build a Request and parse headers each time.
        """
        key = tuple(found.get(name) for name in _CHECKED)
        verdict = self._verdicts.get(key)
        if verdict is None:
            request = Request(scope)
            content_type = request.headers.get("content-type", "")
            has_json, has_sse = check_accept_headers(request)
            verdict = (
                await self._security.validate_request(request, is_post=True) is None
                and content_type.split(";")[0].strip() == "application/json"
                and has_json,
                has_sse,
            )
            if len(self._verdicts) >= _MAX_VERDICTS:
                self._verdicts.clear()  # varied headers cost the checks again, nothing more
            self._verdicts[key] = verdict
        return verdict


def _modern_call(
    scope: Scope,
    message: dict[str, Any],
    request_id: int | str,
    tool: str,
    arguments: dict[str, Any],
) -> _Call | None:
    """The call at a modern protocol version (the 2026-07-28 envelope ladder), or None."""
    headers = Headers(scope=scope)
    if find_duplicated_routing_header(headers.items()) is not None:
        return None
    route = classify_inbound_request(message, headers=dict(headers))
    if not isinstance(route, InboundModernRoute):
        return None
    version = str(route.protocol_version)
    try:
        protocol_methods.validate_client_request("tools/call", version, message["params"])
    except (KeyError, ValueError, ValidationError):
        return None
    modern = version in MODERN_PROTOCOL_VERSIONS
    schema = HEADER_SCHEMAS.get(tool)
    if (
        modern
        and schema is not None
        and validate_mcp_param_headers(schema, arguments, headers) is not None
    ):
        return None
    return _Call(request_id, tool, arguments, modern)


def _modern_listen(scope: Scope, message: dict[str, Any], request_id: int | str) -> _Listen | None:
    """The listen if the SDK would hand it to the listen handler as it is, or None."""
    headers = Headers(scope=scope)
    if find_duplicated_routing_header(headers.items()) is not None:
        return None
    route = classify_inbound_request(message, headers=dict(headers))
    if not isinstance(route, InboundModernRoute):
        return None
    version = str(route.protocol_version)
    if version not in MODERN_PROTOCOL_VERSIONS:
        return None
    try:
        protocol_methods.validate_client_request(_LISTEN, version, message["params"])
        params = SubscriptionsListenRequestParams.model_validate(message["params"])
    except (KeyError, ValueError, ValidationError):
        return None
    wanted = params.notifications
    return _Listen(
        request_id,
        list(wanted.resource_subscriptions or ()),
        tools_list_changed=bool(wanted.tools_list_changed),
        resources_list_changed=bool(wanted.resources_list_changed),
    )


def _first_values(scope: Scope) -> tuple[dict[bytes, bytes], int]:
    """The first value of each header the checks read (as Starlette's ``Headers.get``
    finds it), and how many protocol version headers there are."""
    found: dict[bytes, bytes] = {}
    versions = 0
    for name, value in scope["headers"]:
        if name in _READ:
            if name == _VERSION_HEADER:
                versions += 1
            found.setdefault(name, value)
    return found, versions


def _server_is_plain(server: Server[Any]) -> bool:
    """Whether a tools/call result on this server is just the handler's result, reshaped.

    A server middleware other than the SDK's own tracing one, or a cache hint on
    tools/call, would change what the SDK answers; then every call goes through the SDK.
    """
    plain = all(is_sdk_tracing(m) for m in server.middleware)
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
