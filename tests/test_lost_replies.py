"""A write whose reply from Redis is lost (the command ran, the connection was cut before its
answer came back) is never sent again: it answers `unavailable`, an outcome the caller cannot
know, and the board holds it once. Sending it again on a fresh connection applied an append
twice (found by tests/test_history_under_faults.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from blackboard_mcp.store import Board, EmbeddedRedis, GetState, Unavailable, UpdateState
from blackboard_mcp.testing import FaultProxy

URI = "bb://lost/logs/run"


@pytest.fixture
async def proxied(
    redis_server: EmbeddedRedis, redis_url: str
) -> AsyncIterator[tuple[Board, FaultProxy]]:
    proxy = FaultProxy(redis_server.host, redis_server.port)
    port = await proxy.start()
    board = Board.from_url(redis_url.rsplit(":", 1)[0] + f":{port}/0")
    await board.start()
    yield board, proxy
    await board.close()
    await proxy.close()


async def body_of(board: Board) -> str:
    answer = await board.get_state(GetState.parse({"uris": [URI], "mode": "full"}))
    return str(answer["items"][0]["body"])


async def test_an_append_whose_reply_is_lost_is_not_applied_twice(
    proxied: tuple[Board, FaultProxy],
) -> None:
    board, proxy = proxied
    await board.update_state(
        UpdateState.parse({"uri": URI, "digest": "log", "body": "log:", "expect_version": 0}),
        author="a",
    )
    # An append before, so that Redis holds the append's script: one it lacked would not
    # run (NOSCRIPT), and the reply lost would be that refusal, not the append's.
    await board.update_state(
        UpdateState.parse({"uri": URI + "-warm", "digest": "log", "append": "warm"}), author="a"
    )
    proxy.lose_reply_to = b"once;"  # the append script's arguments hold its text
    with pytest.raises(Unavailable):
        await board.update_state(
            UpdateState.parse({"uri": URI, "digest": "log", "append": "once;"}), author="a"
        )
    proxy.lose_reply_to = None
    assert await body_of(board) == "log:once;"


async def test_a_read_whose_connection_was_closed_while_idle_is_sent_again(
    proxied: tuple[Board, FaultProxy],
) -> None:
    # A pooled connection that Redis (here the proxy) closed while it sat idle has sent
    # nothing: the read goes again on a fresh one, and the caller never sees the restart.
    board, proxy = proxied
    await board.update_state(
        UpdateState.parse({"uri": URI, "digest": "log", "body": "log:", "expect_version": 0}),
        author="a",
    )
    proxy.cut()
    assert await body_of(board) == "log:"
