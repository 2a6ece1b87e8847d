"""The one raw-ASGI JSON sender: a whole answer, its length said, for the paths that answer
without Starlette's Response (the edge's refusals, direct tool calls, a refused listen)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from starlette.types import Send


async def send_json_bytes(
    send: Send,
    payload: bytes,
    *,
    status: int = 200,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """``payload``, already JSON, as the whole answer."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def send_json(
    send: Send,
    status: int,
    body: dict[str, Any],
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """``body`` as JSON, the whole answer."""
    await send_json_bytes(send, orjson.dumps(body), status=status, headers=headers)
