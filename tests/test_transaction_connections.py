"""The connections transactions run on (store/connection/_wire.py), against a real Redis: they
connect as the URL says, survive Redis closing them, never hand a late reply to the next caller, and
count against the pool's bound."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
import redis.asyncio as aioredis
from store_support import RoundTrips

from blackboard_mcp.store import (
    Board,
    BoardClient,
    GetState,
    LinkState,
    ListKeys,
    Unavailable,
    UpdateState,
    board_client,
    every_topic,
)
from blackboard_mcp.store.connection import _key_names as keys
from blackboard_mcp.store.connection._tx import Transaction


def writes(key: str, value: bytes) -> Callable[[Transaction, list[Any]], Any]:
    async def body(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], Any]:
        tx.multi()
        tx.queue("SET", key, value)
        return lambda replies: (first, replies)

    return body


async def set_on_a_wire(client: BoardClient, value: bytes) -> tuple[int, list[Any]]:
    """SET k ``value`` in a transaction; the id Redis gives its connection, and EXEC's replies."""
    (first, replies) = await client.transaction(
        ["k"], writes("k", value), max_retries=0, first_reads=[("CLIENT", "ID")]
    )
    return first[0], replies


def with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


@pytest.fixture
async def one_connection(redis_url: str) -> AsyncIterator[BoardClient]:
    """A board client of one connection: a kept connection would be the next caller's."""
    client = board_client(redis_url, pool_size=1)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def plain(redis_url: str) -> Iterator[redis.Redis]:
    """A plain redis-py client beside the board's, to look at and poke the server."""
    client = redis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        client.close()


async def test_a_connection_redis_closed_while_idle_is_replaced_without_an_error(
    one_connection: BoardClient, plain: redis.Redis
) -> None:
    killed, _ = await set_on_a_wire(one_connection, b"1")
    assert plain.client_kill_filter(_id=killed) == 1
    replacement, replies = await set_on_a_wire(one_connection, b"2")
    assert replacement != killed and replies == [b"OK"]
    assert plain.get("k") == b"2"


async def test_a_transaction_cancelled_mid_round_trip_leaves_no_reply_for_the_next(
    one_connection: BoardClient, plain: redis.Redis
) -> None:
    waiting = one_connection.transaction(
        ["k"],
        writes("k", b"late"),
        max_retries=0,
        first_reads=[("BLPOP", "q", 5)],
    )
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(waiting, 0.3)
    # The cancelled connection is closed, not merely put aside: no connection still
    # waits in the BLPOP whose reply would otherwise come to whoever sends next.
    for _ in range(100):
        blocked = [c for c in plain.client_list() if c["cmd"] == "blpop"]
        if not blocked:
            break
        await asyncio.sleep(0.02)
    assert blocked == []
    plain.rpush("q", b"now the blocked read answers")
    (first, replies) = await one_connection.transaction(
        ["k"], writes("k", b"next"), max_retries=0, first_reads=[("PING",)]
    )
    assert (first, replies) == ([b"PONG"], [b"OK"])
    assert plain.get("k") == b"next"


async def test_transactions_run_in_the_database_the_url_names(redis_url: str) -> None:
    client = board_client(with_db(redis_url, 3))
    direct = redis.Redis.from_url(with_db(redis_url, 3))
    default = redis.Redis.from_url(with_db(redis_url, 0))
    try:
        await client.transaction(["k"], writes("k", b"in three"), max_retries=0)
        assert direct.get("k") == b"in three"
        assert default.get("k") is None
    finally:
        direct.flushdb()
        direct.close()
        default.close()
        await client.aclose()


async def test_a_wrong_password_answers_unavailable_at_once(redis_url: str) -> None:
    parts = urlsplit(redis_url)
    wrong = urlunsplit(parts._replace(netloc=f":not-the-password@{parts.hostname}:{parts.port}"))
    client = board_client(wrong)
    try:
        with pytest.raises(Unavailable):
            await asyncio.wait_for(client.transaction(["k"], writes("k", b"x"), max_retries=0), 3)
    finally:
        await client.aclose()


async def test_transaction_connections_count_against_the_pool_bound(redis_url: str) -> None:
    client = board_client(redis_url, pool_size=2)
    inside = most = 0

    def holding(key: str) -> Callable[[Transaction, list[Any]], Any]:
        async def body(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], Any]:
            nonlocal inside, most
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.05)
            inside -= 1
            tx.multi()
            tx.queue("SET", key, b"1")
            return lambda replies: replies

        return body

    try:
        await asyncio.gather(
            *(client.transaction([f"k{i}"], holding(f"k{i}"), max_retries=0) for i in range(6)),
            # A plain command waits for a slot too, and gets one.
            client.redis.set("plain", b"1"),
        )
        assert most == 2
    finally:
        await client.aclose()


async def test_closing_the_client_closes_idle_transaction_connections(redis_url: str) -> None:
    client = board_client(redis_url, pool_size=4)
    watcher = aioredis.Redis.from_url(redis_url)
    try:
        wire_id, _ = await set_on_a_wire(client, b"1")
        listed = await watcher.client_list()
        assert any(int(c["id"]) == wire_id for c in listed)
        await client.aclose()
        for _ in range(50):
            listed = await watcher.client_list()
            if not any(int(c["id"]) == wire_id for c in listed):
                break
            await asyncio.sleep(0.02)
        assert not any(int(c["id"]) == wire_id for c in listed)
    finally:
        await watcher.aclose()


async def test_a_url_asking_for_resp3_still_writes_links_and_reads(redis_url: str) -> None:
    # redis-py speaks RESP3 on this URL; the store's own connections stay on RESP2, whose
    # reply shapes (a set as a list, a flat member/score list) the store reads.
    board = Board(client=board_client(f"{redis_url}?protocol=3"))
    everyone = every_topic
    try:
        await board.start()
        for name in ("a", "b"):
            await board.update_state(
                UpdateState.parse({"uri": f"bb://w/t/{name}", "digest": name, "body": ""}),
                author="me",
                readable=everyone,
            )
        await board.link_state(
            LinkState.parse({"src": "bb://w/t/a", "rel": "cites", "dst": ["bb://w/t/b"]}),
            author="me",
            readable=everyone,
        )
        await board.delete(author="me", workspace="w", uri="bb://w/t/b")
        got = await board.get_state(
            GetState.parse({"uris": ["bb://w/t/a"], "mode": "full"}), readable=everyone
        )
        assert got["items"][0]["digest"] == "a" and got["cursor"] > 0
        feed = await board.list_keys(
            ListKeys.parse({"topic": "t", "cursor": 0}), workspace="w", readable=everyone
        )
        assert [item["uri"] for item in feed["items"]] == ["bb://w/t/a"]
        assert any("bb://w/t/b" in w for w in feed["warnings"]), feed
    finally:
        await board.close()


async def test_closing_the_client_closes_a_lent_connection_and_its_call_fails_cleanly(
    redis_url: str, plain: redis.Redis
) -> None:
    client = board_client(redis_url, pool_size=1)
    read = asyncio.Event()

    async def slow(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], Any]:
        read.set()
        await asyncio.sleep(0.2)  # the client closes meanwhile
        tx.multi()
        tx.queue("SET", "k", b"after close")
        return lambda replies: replies

    running = asyncio.create_task(client.transaction(["k"], slow, max_retries=0))
    await read.wait()
    await client.aclose()
    with pytest.raises(Unavailable):
        await running
    assert plain.get("k") is None


async def test_a_notes_first_version_joins_its_workspace_to_the_registry_in_its_own_transaction(
    redis_url: str,
) -> None:
    # On a single Redis the registry is on the note's node: a new note is the write's two
    # round trips (WATCH and read, then MULTI..EXEC), with no third for the registry, and
    # its workspace is registered by the same EXEC that creates it. An append creating a
    # note registers it after its script, as on a cluster.
    trips = RoundTrips()
    board = Board(client=trips.client(redis_url))
    check = redis.Redis.from_url(redis_url)
    try:
        await board.start()
        # The wire opened (and authenticated), and Redis holding the scripts, before counting
        # (a Redis without them costs a round trip more, once: tests/test_scripts_by_hash.py).
        await board.get_state(GetState.parse({"uris": ["bb://reg/t/warm"]}))
        for path, warm in (("w", {"body": "b"}), ("log", {"append": "line"})):
            await board.update_state(
                UpdateState.parse({"uri": f"bb://reg/t/{path}", "digest": "w", **warm}),
                author="a",
            )
        for ws, request in (
            (f"reg-{uuid.uuid4().hex[:8]}", {"digest": "first", "body": "b"}),
            (f"reg-{uuid.uuid4().hex[:8]}", {"digest": "first", "append": "line"}),
        ):
            trips.count = 0
            written = await board.update_state(
                UpdateState.parse({"uri": f"bb://{ws}/t/n", **request}), author="a"
            )
            assert written["version"] == 1
            assert check.sismember(keys.workspaces(), ws), ws
            assert trips.count == (2 if "body" in request else 3), request
            assert await board.workspace_exists(ws)
    finally:
        await board.close()
        check.close()
