"""The floor under a compare-and-swap write: HTTP and the gateway's Redis commands, nothing else.

An ASGI app on uvicorn (uvloop, httptools, one worker: the gateway's server settings) that
answers a JSON-RPC ``tools/call`` of update_state by sending Redis exactly the commands the
store sends for it, in the same two round trips: WATCH, the note's HMGET and the call's
admission script; then MULTI, the topic and order indexes, the commit script with the note's
fields, EXEC. It checks ``expect_version`` against what it read, as the store does. It does
not verify a token, validate arguments, count tokens, authorise, audit or measure anything:
no gateway that keeps those can cost less per write than this.

    python bench/_cas_floor_server.py PORT REDIS_URL
"""

from __future__ import annotations

import sys
import time
from typing import Any

import orjson
import redis.asyncio as aioredis
import uvicorn

from blackboard_mcp.gateway._direct import send_json
from blackboard_mcp.store import _keys as keys
from blackboard_mcp.store._admission import _ADMIT
from blackboard_mcp.store._commit import _SCRIPT as _COMMIT
from blackboard_mcp.store._connection import PackedConnection, pack_plain


class FloorApp:
    def __init__(self, redis_url: str) -> None:
        self._redis_url = redis_url
        self._pool: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        request = orjson.loads(b"".join(chunks))
        result = await self._write(request["params"]["arguments"])
        payload = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
        await send_json(send, payload)  # the gateway's own response path

    async def _write(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if self._pool is None:
            self._pool = aioredis.ConnectionPool.from_url(
                self._redis_url, connection_class=PackedConnection, max_connections=64
            )
        uri = arguments["uri"]
        ws, topic, path = uri.removeprefix("bb://").split("/", 2)
        member = f"{topic}/{path}"
        note = keys.note(ws, member)
        now = time.time()
        connection = await self._pool.get_connection()
        try:
            first = [
                ("WATCH", note),
                ("HMGET", note, "version", "digest", "blob", "kind"),
                ("EVAL", _ADMIT, 3, f"{note}:t", f"{note}:s", f"{note}:w", int(now), 0, 120),
            ]
            await connection.send_packed_command(pack_plain(connection, first), False)
            replies = [await connection.read_response() for _ in first]
            old = int(replies[1][0] or 0)
            expected = arguments.get("expect_version")
            if expected is not None and expected != old:
                await connection.send_packed_command(pack_plain(connection, [("UNWATCH",)]))
                await connection.read_response()
                body: dict[str, Any] = {"error": {"code": "conflict", "current_version": old}}
                return {"isError": True, "structuredContent": body}
            version = old + 1
            fields = {
                "uri": uri,
                "ws": ws,
                "topic": topic,
                "kind": "text",
                "digest": arguments["digest"],
                "body": arguments.get("body", ""),
                "version": version,
                "author": "floor",
            }
            second = [
                ("MULTI",),
                ("SADD", keys.topics(ws), topic),
                ("ZADD", keys.by_name(ws, topic), 0, path),
                ("ZADD", keys.by_version(ws, topic), version, path),
                (
                    "EVAL",
                    _COMMIT,
                    4,
                    keys.sequence(ws),
                    note,
                    keys.by_kind(ws, topic, "text"),
                    keys.changelog(ws),
                    path,
                    "100000",
                    "update" if old else "create",
                    uri,
                    str(version),
                    "floor",
                    "0" if old else "1",
                    *[v for pair in fields.items() for v in pair],
                ),
                ("EXEC",),
            ]
            await connection.send_packed_command(pack_plain(connection, second), False)
            for _ in second:
                await connection.read_response()
        finally:
            await self._pool.release(connection)
        body = {"version": version, "digest": arguments["digest"], "warnings": []}
        return {
            "content": [{"type": "text", "text": orjson.dumps(body).decode()}],
            "structuredContent": body,
            "isError": False,
        }


if __name__ == "__main__":
    uvicorn.run(
        FloorApp(sys.argv[2]),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
    )
