"""Small helpers shared by the store tests: a raw Redis view of what a call left behind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any

import redis
from redis.asyncio.connection import Connection as AsyncConnection

from blackboard_mcp.store import (
    Board,
    BoardClient,
    GetState,
    ListKeys,
    SearchKeys,
    UpdateState,
    board_client,
)
from blackboard_mcp.store.connection._board_client import pool_options
from blackboard_mcp.store.connection._pool import WaitingConnectionPool
from blackboard_mcp.store.connection._scripts import sha_of
from blackboard_mcp.store.connection._wire import WireConnection
from blackboard_mcp.store.notes._appends import _APPEND

WS = "ws"


def uri(path: str, *, ws: str = WS, topic: str = "t") -> str:
    return f"bb://{ws}/{topic}/{path}"


def raw(url: str) -> redis.Redis:
    """A plain synchronous client, to look at keys the Board API does not show."""
    return redis.Redis.from_url(url)


def snapshot(url: str) -> dict[bytes, bytes]:
    """Every key with its serialised value: two equal snapshots mean nothing was written."""
    client = raw(url)
    try:
        return {key: client.dump(key) or b"" for key in sorted(client.scan_iter(count=1000))}
    finally:
        client.close()


def dbsize(url: str) -> int:
    client = raw(url)
    try:
        return int(client.dbsize())
    finally:
        client.close()


class ReadGate:
    """Holds each racing task after its first read of a note under WATCH, at its EXEC, until all
    have read.

    A lost update needs two writers to read the same version before either commits. Left to the
    scheduler, racing tasks often run their transactions one after another and a broken WATCH
    goes unseen; behind this gate every racer has read before any reaches EXEC. A task passes
    once: its retries after a WatchError, and every other task of the test, go straight on.
    """

    def __init__(self, racers: int, *, timeout: float = 10.0) -> None:
        self._barrier = asyncio.Barrier(racers)
        self._timeout = timeout
        self._passed: set[asyncio.Task[Any]] = set()
        self.reads = 0

    async def after_read(self, reply: Awaitable[Any]) -> Any:
        value = await reply
        task = asyncio.current_task()
        if task is not None and task not in self._passed:
            self._passed.add(task)
            self.reads += 1
            await asyncio.wait_for(self._barrier.wait(), self._timeout)
        return value


# The store reads a note in its WATCH's own round trip, then sends either MULTI..EXEC or,
# refused (a stale expect_version), UNWATCH (store/connection/_tx.py). Holding both at the
# connection holds every task that has read under WATCH, before any commits. An append reads the
# note's blob name, then sends its script (store/notes/_appends.py): held there likewise.
_AFTER_READ = (b"*1\r\n$5\r\nMULTI\r\n", b"*1\r\n$7\r\nUNWATCH\r\n")
# An append's script goes by hash, and by text only to a Redis that has not loaded it.
_APPEND_SCRIPT = (_APPEND.encode(), sha_of(_APPEND).encode())


class _GatedWire(WireConnection):
    gate: ReadGate

    async def round_trip(self, packed: bytes, count: int) -> list[Any]:
        if packed.upper().startswith(_AFTER_READ) or any(s in packed for s in _APPEND_SCRIPT):
            await self.gate.after_read(_done())
        return await super().round_trip(packed, count)


async def _done() -> None:
    return None


def gated_client(url: str, gate: ReadGate) -> BoardClient:
    """A client whose transactions wait at ``gate`` after reading their note."""
    wire_class = type("GatedWire", (_GatedWire,), {"gate": gate})
    return board_client(url, wire_class=wire_class)


class RoundTrips:
    """Counts the round trips a board's wires make to Redis; with ``also_redis_py``, the
    ones its redis-py connections make too (each command, or each pipeline, sent)."""

    def __init__(self) -> None:
        self.count = 0

    def client(self, url: str, *, also_redis_py: bool = False) -> BoardClient:
        counter = self

        class _CountingWire(WireConnection):
            async def round_trip(self, packed: bytes, count: int) -> list[Any]:
                counter.count += 1
                return await super().round_trip(packed, count)

        if not also_redis_py:
            return board_client(url, wire_class=_CountingWire)

        class _CountingConnection(AsyncConnection):
            async def send_packed_command(
                self, command: bytes | str | Iterable[bytes], check_health: bool = True
            ) -> None:
                counter.count += 1
                await super().send_packed_command(command, check_health)

        options = pool_options(64, 5.0, connect_seconds=5.0, wire_class=_CountingWire)
        pool = WaitingConnectionPool.from_url(url, connection_class=_CountingConnection, **options)
        return BoardClient(pool, timeout_seconds=5.0)


async def write_read_list_and_search(url: str) -> None:
    """A board on ``url`` starts, writes a note and rewrites it with CAS, and finds it by
    get_state, list_keys and search_keys: every kind of the store's Redis connection used."""
    board = Board(client=board_client(url))
    try:
        await board.start()
        uri = "bb://w/t/a"
        written = await board.update_state(
            UpdateState.parse({"uri": uri, "digest": "ptarmigan sighting", "body": "seen at dawn"}),
            author="me",
        )
        again = await board.update_state(
            UpdateState.parse(
                {
                    "uri": uri,
                    "digest": "ptarmigan sighting",
                    "body": "seen at dawn, twice",
                    "expect_version": 1,
                }
            ),
            author="me",
        )
        assert (written["version"], again["version"]) == (1, 2)
        got = await board.get_state(GetState.parse({"uris": [uri], "mode": "full"}))
        assert (got["items"][0]["version"], got["items"][0]["body"]) == (2, "seen at dawn, twice")
        listed = await board.list_keys(ListKeys.parse({"topic": "t"}), workspace="w")
        assert [i["uri"] for i in listed["items"]] == [uri]
        found = await board.search_keys(SearchKeys.parse({"q": "ptarmigan"}), workspace="w")
        assert [i["uri"] for i in found["items"]] == [uri]
    finally:
        await board.close()


async def sweep_as_the_sweeper(
    board: Board, url: str, *, owner: str, now_ms: int | None = None
) -> Any:
    """``board.sweep_retention`` as the one sweeper of this Redis.

    The gateway processes other tests share the session's Redis with sweep retention now and
    then, and hold the sweeper's lease when they do: a test that sweeps frees the lease first
    (and again, a bounded number of times, should one take it in between)."""
    from blackboard_mcp.store.connection._key_names import retention_lease

    for _ in range(5):
        client = raw(url)
        try:
            client.delete(retention_lease())
        finally:
            client.close()
        swept = await board.sweep_retention(owner=owner, lease_seconds=5, now_ms=now_ms)
        if swept is not None:
            return swept
    raise AssertionError("another sweeper took the retention lease every time")
