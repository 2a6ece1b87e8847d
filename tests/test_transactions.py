"""The store's WATCH/MULTI/EXEC runner on a real Redis: a gate runs once, and a connection
goes back to the pool with nothing watched and nothing unread, however the transaction ends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from blackboard_mcp.store import BoardClient, Contended, Unavailable, board_client
from blackboard_mcp.store.connection._tx import Gate, Transaction


class Refused(Exception):
    pass


@pytest.fixture
async def one_connection(redis_url: str) -> AsyncIterator[BoardClient]:
    """A client whose pool lends one connection at a time, as the board's pool does: every
    transaction reuses the last one's connection."""
    client = board_client(redis_url, pool_size=1, pool_wait_seconds=1.0)
    yield client
    await client.aclose()


def counting_gate(verdicts: list[int], *, refuse: bool = False) -> Gate:
    def judge(reply: Any) -> None:
        verdicts.append(int(reply))
        if refuse:
            raise Refused

    return Gate(command=("INCR", "gate-runs"), judge=judge)


def set_to(value: bytes) -> Callable[[Transaction, list[Any]], Any]:
    async def body(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], Any]:
        tx.multi()
        tx.queue("SET", "k", value)
        return lambda replies: (first, replies)

    return body


async def test_a_gate_runs_once_though_the_transaction_is_retried_after_a_lost_race(
    one_connection: BoardClient, redis_url: str
) -> None:
    other = aioredis.Redis.from_url(redis_url)
    attempts = 0

    async def body(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], Any]:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await other.set("k", b"theirs")  # changes the watched key: this EXEC must fail
        tx.multi()
        tx.queue("SET", "k", b"ours")
        return lambda replies: replies

    verdicts: list[int] = []
    try:
        replies = await one_connection.transaction(
            ["k"],
            body,
            max_retries=3,
            first_reads=[("GET", "k")],
            gate=counting_gate(verdicts),
        )
    finally:
        await other.aclose()
    assert attempts == 2
    assert verdicts == [1]
    assert replies == [b"OK"]
    assert await one_connection.redis.get("gate-runs") == b"1"
    assert await one_connection.redis.get("k") == b"ours"


@pytest.mark.parametrize("refused_by", ["gate", "body"])
async def test_a_refused_transaction_leaves_its_connection_watching_nothing(
    one_connection: BoardClient, redis_url: str, refused_by: str
) -> None:
    async def refusing_body(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], Any]:
        raise Refused

    with pytest.raises(Refused):
        await one_connection.transaction(
            ["k"],
            refusing_body if refused_by == "body" else set_to(b"never"),
            max_retries=0,
            first_reads=[("GET", "k")],
            gate=counting_gate([], refuse=refused_by == "gate"),
        )
    assert await one_connection.redis.get("k") is None
    # Another client changes "k"; the next transaction on the same pooled connection watches
    # "j" only. A WATCH on "k" left over from the refusal would fail its EXEC, and with no
    # retry allowed, raise Contended.
    other = aioredis.Redis.from_url(redis_url)
    try:
        await other.set("k", b"theirs")
    finally:
        await other.aclose()
    first, replies = await one_connection.transaction(
        ["j"], set_to(b"mine"), max_retries=0, first_reads=[("GET", "j")]
    )
    assert (first, replies) == ([None], [b"OK"])
    assert await one_connection.redis.get("k") == b"mine"


async def test_exhausted_retries_raise_contended_and_write_nothing(
    one_connection: BoardClient, redis_url: str
) -> None:
    other = aioredis.Redis.from_url(redis_url)

    async def always_loses(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], Any]:
        await other.incr("k")
        tx.multi()
        tx.queue("SET", "mine", b"1")
        return lambda replies: replies

    try:
        with pytest.raises(Contended):
            await one_connection.transaction(["k"], always_loses, max_retries=2)
    finally:
        await other.aclose()
    assert await one_connection.redis.get("k") == b"3"
    assert await one_connection.redis.get("mine") is None


async def test_a_command_refused_in_the_queue_aborts_the_whole_transaction(
    one_connection: BoardClient,
) -> None:
    async def body(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], Any]:
        tx.multi()
        tx.queue("SET", "k", b"v")
        tx.queue("SET", "too-few-arguments")
        return lambda replies: replies

    with pytest.raises(Unavailable, match=r"EXECABORT|wrong number of arguments"):
        await one_connection.transaction(["k"], body, max_retries=0)
    assert await one_connection.redis.get("k") is None
    # The connection is in step: the next transaction on it reads its own replies.
    first, replies = await one_connection.transaction(
        ["k"], set_to(b"after"), max_retries=0, first_reads=[("PING",)]
    )
    assert (first, replies) == ([b"PONG"], [b"OK"])
