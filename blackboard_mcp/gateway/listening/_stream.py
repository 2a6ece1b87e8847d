"""A ``subscriptions/listen`` stream written straight to the HTTP response.

Through the SDK every notification of every listener is a pydantic model, dumped twice,
JSON-encoded and handed through a memory stream to the transport's task: with 100
listeners that is most of a write's cost (bench/RESULTS.md, "Change notifications").
Here each change's part of the frame (``Notice.uri_json``) is encoded once, by the pump,
for all of this process's listeners; a stream adds only its subscription id, fixed for its
life, and the changes already waiting go out in one write.

What is checked, refused, acknowledged and followed is the SDK path's own code
(_subscriptions.py ``Listens``); this module writes the same frames the SDK's transport
writes: the acknowledgement first, then the notifications (a resource list's change is a
frame of its own, fixed for the stream's life), an SSE comment after every
15 s of silence, and the JSON-RPC result (or error) as the last event. A refusal before the
stream starts is a JSON answer with the status the SDK's table gives its code.
tests/test_direct_calls.py holds both paths to the same frames.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import orjson
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, RequestId
from starlette.types import Receive, Send

from .._json_answers import send_json_bytes
from .._mcp_sdk_adapter import ERROR_CODE_HTTP_STATUS, SERVER_INFO_META_KEY
from ._hub import Notice
from ._subscriptions import Listens

log = logging.getLogger(__name__)

# The SDK transport's SSE headers and keep-alive, so either path looks alike to a proxy.
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
KEEPALIVE = b": ping\r\n\r\n"
KEEPALIVE_SECONDS = 15.0
_UPDATED_HEAD = (
    b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/resources/updated",'
    b'"params":{"_meta":'
)
_UPDATED_TAIL = b"}}\r\n\r\n"
_LIST_CHANGED = "notifications/resources/list_changed"


def sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\r\ndata: " + orjson.dumps(message) + b"\r\n\r\n"


def error_message(request_id: RequestId, exc: MCPError) -> dict[str, Any]:
    error = exc.error.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


class DirectListen:
    """Serves one admitted-to-parse listen request on the direct path."""

    def __init__(self, listens: Listens, *, server_info: Any) -> None:
        self._listens = listens
        # Fixed for the server's life; serialised straight away, so never aliased.
        self._server_info = server_info

    async def serve(
        self,
        request_id: RequestId,
        uris: list[str],
        receive: Receive,
        send: Send,
        *,
        tools_list_changed: bool = False,
        resources_list_changed: bool = False,
    ) -> None:
        try:
            listen = await self._listens.admit(
                request_id,
                uris,
                tools_list_changed=tools_list_changed,
                resources_list_changed=resources_list_changed,
            )
        except MCPError as exc:
            await send_json_bytes(
                send,
                orjson.dumps(error_message(request_id, exc)),
                status=ERROR_CODE_HTTP_STATUS.get(exc.code, 200),
            )
            return
        head = _UPDATED_HEAD + orjson.dumps(listen.meta) + b',"uri":'
        acknowledgement = listen.acknowledgement().model_dump(
            mode="json", by_alias=True, exclude_none=True
        )

        async def acknowledge() -> None:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await _send_part(send, sse_event({"jsonrpc": "2.0", **acknowledgement}))

        between = _UPDATED_TAIL + head
        list_changed = sse_event(
            {"jsonrpc": "2.0", "method": _LIST_CHANGED, "params": {"_meta": listen.meta}}
        )

        async def deliver(notices: list[Notice]) -> None:
            if not resources_list_changed:  # only such a stream is sent list changes
                frames = between.join([notice.uri_json for notice in notices])
                await _send_part(send, head + frames + _UPDATED_TAIL)
                return
            parts = [
                list_changed if n.list_changed else head + n.uri_json + _UPDATED_TAIL
                for n in notices
            ]
            await _send_part(send, b"".join(parts))

        async def keep_alive() -> None:
            await _send_part(send, KEEPALIVE)

        last: dict[str, Any] | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(_cancel_on_disconnect, receive, group.cancel_scope)
            try:
                await self._listens.follow(
                    listen,
                    acknowledge,
                    deliver,
                    idle_seconds=KEEPALIVE_SECONDS,
                    on_idle=keep_alive,
                )
                meta = {**listen.meta, SERVER_INFO_META_KEY: self._server_info}
                result = {"_meta": meta, "resultType": "complete"}
                last = {"jsonrpc": "2.0", "id": request_id, "result": result}
            except MCPError as exc:
                last = error_message(request_id, exc)
            except Exception:
                log.exception("listen stream failed")
                last = error_message(request_id, MCPError(INTERNAL_ERROR, "Internal server error"))
            group.cancel_scope.cancel()
        if last is not None:
            # None: the client left, and there is nobody to tell how the stream ended. A
            # client that stopped reading gets a while to take the last event, not for ever.
            with anyio.move_on_after(KEEPALIVE_SECONDS):
                await send(
                    {"type": "http.response.body", "body": sse_event(last), "more_body": False}
                )


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _send_part(send: Send, body: bytes) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": True})
