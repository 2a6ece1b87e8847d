"""How the store talks to Redis: one deadline per operation, commands packed as redis-py packs.

The pool has no socket timeout (a timer around every command cost a fifth of a write's CPU);
a Redis that stops answering is noticed by the operation's deadline instead, and the call
answers `unavailable` rather than hanging.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import hiredis
import pytest
import redis.asyncio as aioredis
from redis.exceptions import DataError

from blackboard_mcp.auth import Grant
from blackboard_mcp.store import (
    Board,
    GetState,
    ListKeys,
    Overloaded,
    SearchKeys,
    Unavailable,
    UpdateState,
)
from blackboard_mcp.store.access._admission import Admission, RedisCallAdmission
from blackboard_mcp.store.access._ratelimit import RedisRateLimiter
from blackboard_mcp.store.connection import _redis_errors
from blackboard_mcp.store.connection._wire import pack


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers: a hung Redis."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


@pytest.fixture
async def hung_board(silent_server: int) -> AsyncIterator[Board]:
    """A board on the hung Redis, whose operations have 0.3 s each."""
    board = Board.from_url(
        f"redis://127.0.0.1:{silent_server}/0", pool_size=20, timeout_seconds=0.3
    )
    try:
        yield board
    finally:
        await board.close()


async def test_a_redis_that_stops_answering_gives_unavailable_within_the_deadline(
    hung_board: Board,
) -> None:
    for call in (
        lambda: hung_board.get_state(GetState.parse({"uris": ["bb://ws/t/k"]})),
        lambda: hung_board.update_state(
            UpdateState.parse({"uri": "bb://ws/t/k", "digest": "d", "body": "b"}), author="a"
        ),
    ):
        started = time.monotonic()
        with pytest.raises(Unavailable) as failed:
            await call()
        assert not isinstance(failed.value, Overloaded)
        assert "did not answer within 0.3 s" in str(failed.value)
        assert time.monotonic() - started < 2.0


async def test_a_deadline_that_runs_out_waiting_for_a_connection_is_overloaded(
    redis_url: str,
) -> None:
    # The pool would wait 5 s; the operation's deadline (0.3 s) runs out first, while the
    # call still waits for a connection: Redis answers, so the answer is `overloaded`.
    board = Board.from_url(redis_url, pool_size=1, pool_wait_seconds=5.0, timeout_seconds=0.3)
    try:
        holder = asyncio.create_task(board.client.blpop(["bb-test-nothing"], timeout=1))
        await asyncio.sleep(0.05)
        with pytest.raises(Overloaded):
            await board.get_state(GetState.parse({"uris": ["bb://ws/t/k"]}))
        await holder
        # The same task context, later: a real outage is not reported as `overloaded`.
        answer = await board.get_state(GetState.parse({"uris": ["bb://ws/t/k"]}))
        assert answer["items"][0]["uri"] == "bb://ws/t/k"
    finally:
        await board.close()


async def test_every_one_of_many_operations_at_once_gets_its_own_deadline(
    hung_board: Board,
) -> None:
    # One timer checks every running operation's deadline (store/connection/_redis_errors.py): each
    # of them, started at different times, still ends `unavailable` near its own deadline.
    async def timed(delay: float) -> float:
        await asyncio.sleep(delay)
        started = time.monotonic()
        with pytest.raises(Unavailable):
            await hung_board.get_state(GetState.parse({"uris": [f"bb://ws/t/k{delay}"]}))
        return time.monotonic() - started

    waits = await asyncio.gather(*(timed(i * 0.02) for i in range(12)))
    # Never before its own deadline; the upper bound only has to tell "its deadline fired"
    # from "it waited for another's" or "it hung", so it is generous for a loaded machine.
    assert all(0.29 <= wait < 3.0 for wait in waits), waits


async def test_a_caller_cancelling_an_operation_gets_its_cancellation_not_unavailable(
    hung_board: Board,
) -> None:
    # A client that hangs up cancels its call's task: that is not a Redis outage, and the
    # deadline, which never fired, must not turn it into one.
    call = asyncio.create_task(hung_board.get_state(GetState.parse({"uris": ["bb://ws/t/k"]})))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # Nothing of the cancelled operation fires later, on another call of the same loop.
    await asyncio.sleep(0.4)
    late = asyncio.create_task(asyncio.sleep(0.1, result="done"))
    assert await late == "done"


async def test_a_task_whose_operation_ran_out_of_time_goes_on_uncancelled() -> None:
    started = time.monotonic()
    # An operation inside another (one store call made by another): the outer deadline is
    # the one that counts, and it fires once.
    with pytest.raises(Unavailable) as failed:
        async with _redis_errors.mapped_redis_errors(0.2), _redis_errors.mapped_redis_errors(0.2):
            await asyncio.sleep(10)
    assert 0.19 <= time.monotonic() - started < 3.0  # fired once, not at 10 s (generous)
    assert isinstance(failed.value.__cause__, TimeoutError)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    # The task can await again, and a later operation has a whole deadline of its own.
    await asyncio.sleep(0.3)
    async with _redis_errors.mapped_redis_errors(0.2):
        await asyncio.sleep(0.1)


@pytest.mark.parametrize(
    "args",
    [
        ("SET", "k", "v"),
        ("HSET", "bbn:{ws}:t/k", "digest", "café ☕", "size", 12, "confidence", 0.9),
        ("EVAL", "return 1", 2, "k1", "k2", -1, 1.5e-07, "x" * 70_000, b"\x00\xff"),
    ],
)
def test_the_stores_own_commands_are_packed_byte_for_byte_as_redis_py_packs_them(
    args: tuple[object, ...],
) -> None:
    # What the store's own connection sends (store/connection/_wire.py): one buffer, each command
    # whole.
    plain = aioredis.Connection()
    expected = b"".join(plain.pack_commands([("MULTI",), args, ("EXEC",)]))
    assert pack([("MULTI",), args, ("EXEC",)]) == expected


@pytest.mark.parametrize("bad", [None, True])
def test_an_argument_redis_cannot_take_is_refused_before_it_is_sent(bad: object) -> None:
    with pytest.raises(DataError):
        pack([("SET", "k", bad)])


class _LoadingProxy:
    """A TCP proxy to a real Redis that, while ``loading``, answers every command itself with
    Redis's reply during a restart's load (``-LOADING``) instead of passing it on."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream_port = upstream_port
        self.loading = False
        self.refused = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port)
        back = asyncio.create_task(self._pipe(up_reader, writer))
        self._tasks.add(back)
        commands = hiredis.Reader()
        try:
            while data := await reader.read(65536):
                commands.feed(data)
                while (command := commands.gets()) is not False:
                    if self.loading:
                        self.refused += 1
                        writer.write(b"-LOADING Redis is loading the dataset in memory\r\n")
                    else:
                        up_writer.write(hiredis.pack_command(tuple(command)))
        finally:
            back.cancel()
            up_writer.close()
            writer.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)


async def test_a_redis_loading_its_data_is_unavailable_on_every_path_and_the_connections_recover(
    redis_url: str,
) -> None:
    # After a restart Redis answers every command `-LOADING` until its data is in memory. The
    # store's own connections read such replies as values: each must fail its call as
    # `unavailable`, never be taken for data (an `internal` error, or a wrong answer).
    real = urlsplit(redis_url)
    assert real.port is not None
    proxy = _LoadingProxy(real.port)
    port = await proxy.start()
    at_proxy = real._replace(netloc=real.netloc.replace(f":{real.port}", f":{port}"))
    board = Board.from_url(urlunsplit(at_proxy), cluster="off")
    limiter = RedisRateLimiter(client=board.redis.routed, per_minute=0)
    admission = RedisCallAdmission(redis=board.redis, limiter=limiter)
    token = Grant("a", "ws", ("*",), ("*",), frozenset(), frozenset(), "tk", time.time(), 1e12)
    refusals: list[Admission] = []
    try:
        await board.start()
        uri = f"bb://ws/loading/n{time.monotonic_ns()}"
        written = await board.update_state(
            UpdateState.parse({"uri": uri, "digest": "before the restart", "body": "b"}),
            author="a",
        )
        calls = {
            "get_state": lambda: board.get_state(GetState.parse({"uris": [uri]})),
            "update_state": lambda: board.update_state(
                UpdateState.parse(
                    {"uri": uri, "digest": "d", "body": "b", "expect_version": written["version"]}
                ),
                author="a",
            ),
            "gated update_state": lambda: board.update_state(
                UpdateState.parse({"uri": uri, "digest": "d", "body": "b"}),
                author="a",
                gate=admission.gate(token, refusals.append),
            ),
            "append": lambda: board.update_state(
                UpdateState.parse({"uri": uri + "-log", "digest": "d", "append": "line"}),
                author="a",
            ),
            "list_keys": lambda: board.list_keys(
                ListKeys.parse({"topic": "loading"}), workspace="ws"
            ),
            "search_keys": lambda: board.search_keys(
                SearchKeys.parse({"q": "restart"}), workspace="ws"
            ),
            "admission": lambda: admission.admit(token),
        }
        proxy.loading = True
        for name, call in calls.items():
            before = proxy.refused
            with pytest.raises(Unavailable) as failed:
                await call()
            assert proxy.refused > before, f"{name} never reached Redis"
            assert "loading" in str(failed.value), (name, failed.value)
        assert refusals == []  # a gate's verdict is never read out of an error reply
        proxy.loading = False
        # The same connections serve again, every reply in step with its command.
        read = await board.get_state(GetState.parse({"uris": [uri]}))
        assert read["items"][0]["digest"] == "before the restart"
        again = await board.update_state(
            UpdateState.parse(
                {"uri": uri, "digest": "after", "body": "b", "expect_version": written["version"]}
            ),
            author="a",
        )
        assert again["version"] == written["version"] + 1
    finally:
        await board.close()
        await proxy.close()
