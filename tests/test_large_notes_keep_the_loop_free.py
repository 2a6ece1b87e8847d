"""A long note's token count runs beside the event loop: the process keeps serving other calls.

Counting a text takes about 40 microseconds a KiB, so a 1 MiB body held a gateway process's
event loop for tens of milliseconds, and every other call on it waited that long. The
counter here is the real one, except that a long text's count waits until the test lets
it finish: on the event loop's own thread that wait stops everything else, so the other
call below could not be answered before it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
import pytest
from store_support import raw

from blackboard_mcp.store import (
    Board,
    BoardLimits,
    GetState,
    TiktokenCounter,
    UpdateState,
    board_client,
)
from blackboard_mcp.store.connection._field_names import FIELD
from blackboard_mcp.store.notes._tokencount import OFF_LOOP_CHARS

# Longer than what the store counts on the event loop; shorter than the notes written below.
_LONG = OFF_LOOP_CHARS + 1
_BODY = 'Gr\u00fc\u00dfe \u6771\u4eac \U0001f600 "quoted"\tcell\n' * 2_000
_COLUMNS = ["id", "text", "tag"]
_ROWS = [[str(i), f'Gr\u00fc\u00dfe \u6771\u4eac \U0001f600 "row" {i}', "t"] for i in range(2_000)]
_TSV = "\n".join("\t".join(row) for row in [_COLUMNS, *_ROWS])
_SHAPES: dict[str, dict[str, Any]] = {
    "body": {"body": _BODY},
    "append": {"append": _BODY},
    "table": {"columns": _COLUMNS, "rows": _ROWS},
}
_SECONDS = 5


class _HeldCounter:
    """cl100k counts, a long text's held until ``release`` is set."""

    def __init__(self) -> None:
        self._real = TiktokenCounter()
        self.counting = threading.Event()
        self.release = threading.Event()
        self.threads: set[int] = set()

    def count(self, text: str) -> int:
        if len(text) > _LONG:
            self.threads.add(threading.get_ident())
            self.counting.set()
            if not self.release.wait(_SECONDS):
                raise AssertionError("a long count ran on the event loop: nothing else could")
        return self._real.count(text)

    def cut(self, text: str, max_tokens: int) -> str:
        return self._real.cut(text, max_tokens)


@pytest.fixture
async def held_board(redis_url: str) -> Any:
    counter = _HeldCounter()
    board = Board(client=board_client(redis_url), limits=BoardLimits(), counter=counter)
    await board.start()
    yield board, counter
    await board.close()


@pytest.mark.parametrize("shape", sorted(_SHAPES))
async def test_a_long_note_is_counted_while_other_calls_are_answered(
    held_board: tuple[Board, _HeldCounter], redis_url: str, shape: str
) -> None:
    board, counter = held_board
    await board.update_state(
        UpdateState.parse({"uri": "bb://ws/t/small", "digest": "a short note", "body": "hi"}),
        author="a",
    )
    loop_thread = threading.get_ident()
    write = asyncio.create_task(
        board.update_state(
            UpdateState.parse({"uri": "bb://ws/t/long", "digest": "a long note", **_SHAPES[shape]}),
            author="a",
        )
    )
    assert await asyncio.to_thread(counter.counting.wait, _SECONDS)
    read = await board.get_state(GetState.parse({"uris": ["bb://ws/t/small"]}))
    assert [item["digest"] for item in read["items"]] == ["a short note"]
    assert not write.done()
    counter.release.set()
    assert (await write)["version"] == 1
    assert loop_thread not in counter.threads

    client = raw(redis_url)
    try:
        stored = client.hmget("bbn:{ws}:t/long", [FIELD.body_tokens, FIELD.digest_tokens])
    finally:
        client.close()
    content = _TSV if shape == "table" else _BODY
    expected = TiktokenCounter().count(orjson.dumps(content).decode()[1:-1])
    assert [int(v) for v in stored] == [expected, TiktokenCounter().count("a long note")]


@pytest.mark.parametrize("shape", ["body", "table"])
async def test_a_long_read_is_counted_while_other_calls_are_answered(
    held_board: tuple[Board, _HeldCounter], shape: str
) -> None:
    board, counter = held_board
    counter.release.set()
    for uri, digest, content in (
        ("long", "a long note", _SHAPES[shape]),
        ("small", "a short note", {"body": "hi"}),
    ):
        await board.update_state(
            UpdateState.parse({"uri": f"bb://ws/t/{uri}", "digest": digest, **content}),
            author="a",
        )
    counter.release.clear()
    counter.counting.clear()
    counter.threads.clear()
    loop_thread = threading.get_ident()
    mode = "table" if shape == "table" else "full"
    whole = GetState.parse({"uris": ["bb://ws/t/long"], "mode": mode, "budget_tokens": 100_000})
    read_long = asyncio.create_task(board.get_state(whole))
    assert await asyncio.to_thread(counter.counting.wait, _SECONDS)
    read = await board.get_state(GetState.parse({"uris": ["bb://ws/t/small"]}))
    assert [item["digest"] for item in read["items"]] == ["a short note"]
    assert not read_long.done()
    counter.release.set()
    answer = await read_long
    shown = [item["rows" if shape == "table" else "body"] for item in answer["items"]]
    assert shown == [_ROWS if shape == "table" else _BODY]
    assert answer["spent_tokens"] == TiktokenCounter().count(orjson.dumps(answer).decode())
    assert loop_thread not in counter.threads


async def test_a_long_answer_is_fitted_outside_the_redis_operations_deadline(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counting and cutting an answer is the process's own work, not a wait for Redis: on a
    # busy process it may take longer than BB_REDIS_TIMEOUT_SECONDS, and the read must not
    # then be answered `unavailable` as if Redis had not answered.
    counter = _HeldCounter()
    counter.release.set()
    board = Board(client=board_client(redis_url, timeout_seconds=1.0), counter=counter)
    try:
        await board.update_state(
            UpdateState.parse({"uri": "bb://ws/t/long", "digest": "long", "body": _BODY}),
            author="a",
        )
        counter.release.clear()
        counter.counting.clear()
        whole = GetState.parse(
            {"uris": ["bb://ws/t/long"], "mode": "full", "budget_tokens": 100_000}
        )
        read = asyncio.create_task(board.get_state(whole))
        assert await asyncio.to_thread(counter.counting.wait, _SECONDS)
        loop = asyncio.get_running_loop()
        clock = loop.time
        monkeypatch.setattr(loop, "time", lambda: clock() + 60.0)
        for _ in range(50):
            await asyncio.sleep(0)  # any deadline due by now fires
        counter.release.set()
        answer = await read
        assert [item["body"] for item in answer["items"]] == [_BODY]
    finally:
        counter.release.set()
        await board.close()
