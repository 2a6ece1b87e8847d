"""The floor under a compare-and-swap write: HTTP and the gateway's Redis commands, nothing else.

An ASGI app on uvicorn (uvloop, httptools, one worker: the gateway's server settings) that
answers a JSON-RPC ``tools/call`` of update_state by sending Redis exactly the commands the
store sends for it, in the same two round trips: WATCH, the note's HMGET and the call's
admission script; then MULTI, the write's one script (it keeps the old version at the
board's default history bounds, adds the note to its topic's indexes and writes its fields),
EXEC; each script by hash, as the store sends them to a Redis that has them;
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
from blackboard_mcp.store.connection._scripts import all_by_hash, load
from blackboard_mcp.store.notes._commit import WriteCommands, queue_write
from blackboard_mcp.store.notes._history import HistoryLimits


class _Queued:
    """Collects what the store's write queues (a Transaction's ``queue``)."""

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def queue(self, *command: Any) -> None:
        self.commands.append(command)


class FloorApp:
    def __init__(self, redis_url: str) -> None:
        self._redis_url = redis_url
        self._pool: Any = None
        self._loaded = False

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
            if not self._loaded:
                await load(wire, first)
            replies = await wire.round_trip(_packed(all_by_hash(first)), len(first))
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
            commands = WriteCommands()
            commands.add("SADD", keys.topics(ws), topic)
            commands.add("ZADD", keys.by_name(ws, topic), 0, path)
            commands.add("ZADD", keys.by_version(ws, topic), version, path)
            queued = _Queued()
            queue_write(
                queued,  # type: ignore[arg-type]  # a Transaction's queue is all it uses
                workspace=ws,
                topic=topic,
                member=member,
                kind="text",
                op="update" if old else "create",
                uri=uri,
                version=version,
                author="floor",
                changelog_maxlen=100_000,
                history=HistoryLimits(),
                commands=commands,
                note_fields=fields,
                is_new=not old,
            )
            if not self._loaded:
                await load(wire, queued.commands)
                self._loaded = True
            second = [("MULTI",), *all_by_hash(queued.commands), ("EXEC",)]
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
