"""The floor under a compare-and-swap write: HTTP and the gateway's Redis commands, nothing else.

An ASGI app on uvicorn (uvloop, httptools, one worker: the gateway's server settings) that
answers a JSON-RPC ``tools/call`` of update_state by sending Redis exactly the commands the
store sends for it, in the same two round trips: WATCH, the note's HMGET and the call's
admission script; then MULTI, the script that keeps the old version (history at the board's
default bounds), the topic and order indexes, the commit script with the note's fields, EXEC;
on the connection kind the store's transactions use (store/connection/_wire.py), lent by the
board's pool. It checks ``expect_version`` against what it read, as the store does. It does not
verify a token, validate arguments, count tokens, authorise, audit or measure anything: no
gateway that keeps those can cost less per write than this.

    python bench/_cas_floor_server.py PORT REDIS_URL
"""

from __future__ import annotations

import sys
import time
from typing import Any

import orjson
import uvicorn
from hiredis import pack_command

from blackboard_mcp.gateway._json_answers import send_json_bytes
from blackboard_mcp.store.access._admission import _ADMIT
from blackboard_mcp.store.connection import _key_names as keys
from blackboard_mcp.store.connection._board_client import pool_options
from blackboard_mcp.store.connection._field_names import FIELD
from blackboard_mcp.store.connection._pool import WaitingConnectionPool
from blackboard_mcp.store.notes._commit import _SCRIPT as _COMMIT
from blackboard_mcp.store.notes._history import HistoryLimits, keep_version_command


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
        await send_json_bytes(send, payload)  # the gateway's own response path

    async def _write(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if self._pool is None:
            self._pool = WaitingConnectionPool.from_url(
                self._redis_url,
                **pool_options(pool_size=64, pool_wait_seconds=5.0, connect_seconds=5.0),
            )
        uri = arguments["uri"]
        ws, topic, path = uri.removeprefix("bb://").split("/", 2)
        member = f"{topic}/{path}"
        note = keys.note(ws, member)
        now = time.time()
        wire = await self._pool.lend_wire()
        try:
            first = [
                ("WATCH", note),
                ("HMGET", note, FIELD.version, FIELD.digest, FIELD.blob, FIELD.kind),
                ("EVAL", _ADMIT, 3, f"{note}:t", f"{note}:s", f"{note}:w", int(now), 0, 120),
            ]
            replies = await wire.round_trip(_packed(first), len(first))
            old = int(replies[1][0] or 0)
            expected = arguments.get("expect_version")
            if expected is not None and expected != old:
                await wire.round_trip(_packed([("UNWATCH",)]), 1)
                body: dict[str, Any] = {"error": {"code": "conflict", "current_version": old}}
                return {"isError": True, "structuredContent": body}
            version = old + 1
            fields = {
                FIELD.ws: ws,
                FIELD.topic: topic,
                FIELD.kind: "text",
                FIELD.digest: arguments["digest"],
                FIELD.body: arguments.get("body", ""),
                FIELD.version: version,
                FIELD.author: "floor",
            }
            second = [
                ("MULTI",),
                keep_version_command(ws, member, HistoryLimits()),
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
            await wire.round_trip(_packed(second), len(second))
        finally:
            self._pool.return_wire(wire)
        body = {"version": version, "digest": arguments["digest"], "warnings": []}
        return {
            "content": [{"type": "text", "text": orjson.dumps(body).decode()}],
            "structuredContent": body,
            "isError": False,
        }


def _packed(commands: list[tuple[Any, ...]]) -> bytes:
    return b"".join([pack_command(command) for command in commands])


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
