"""append: extends a text note under the same CAS transaction, without expect_version."""

from __future__ import annotations

import asyncio

import pytest
from store_support import raw, snapshot, uri

from blackboard_mcp.store import Board, InvalidArgument

AUTHOR = "agent"


async def body_of(board: Board, address: str) -> tuple[str, int]:
    response = await board.get_state(uris=[address], mode="full", budget_tokens=100_000)
    [item] = response["items"]
    assert "cut" not in item
    return item["body"], item["version"]


async def test_append_to_a_missing_note_creates_it(board: Board) -> None:
    result = await board.update_state(author=AUTHOR, uri=uri("log"), digest="A log.", append="a\n")
    assert result == {"version": 1, "digest": "A log.", "warnings": []}
    assert await body_of(board, uri("log")) == ("a\n", 1)
    [change] = await board.changes("ws")
    assert change["op"] == "append"


async def test_append_extends_the_body_and_bumps_the_version(board: Board) -> None:
    await board.update_state(
        author=AUTHOR, uri=uri("log"), digest="A log.", body="one\n", expect_version=0
    )
    first = await board.update_state(
        author=AUTHOR, uri=uri("log"), digest="A log, two.", append="two\n"
    )
    second = await board.update_state(
        author=AUTHOR, uri=uri("log"), digest="A log, three.", append="three\n"
    )
    assert (first["version"], second["version"]) == (2, 3)
    assert await body_of(board, uri("log")) == ("one\ntwo\nthree\n", 3)
    [item] = (await board.get_state(uris=[uri("log")]))["items"]
    assert item["digest"] == "A log, three."


async def test_append_keeps_sources_and_confidence_it_does_not_replace(board: Board) -> None:
    await board.update_state(
        author=AUTHOR,
        uri=uri("log"),
        digest="d",
        body="x",
        sources=[uri("origin")],
        confidence=0.5,
        expect_version=0,
    )
    await board.update_state(author=AUTHOR, uri=uri("log"), digest="d", append="y")
    [item] = (await board.get_state(uris=[uri("log")], mode="full"))["items"]
    assert (item["body"], item["sources"], item["confidence"]) == ("xy", [uri("origin")], 0.5)


async def test_concurrent_appends_are_all_kept(board: Board) -> None:
    tasks = 50
    results = await asyncio.gather(
        *(
            board.update_state(author=f"a{i}", uri=uri("log"), digest="A log.", append=f"<{i}>")
            for i in range(tasks)
        )
    )
    assert sorted(r["version"] for r in results) == list(range(1, tasks + 1))
    body, version = await body_of(board, uri("log"))
    assert version == tasks
    for i in range(tasks):
        assert body.count(f"<{i}>") == 1
    assert len(body) == sum(len(f"<{i}>") for i in range(tasks))


async def test_append_to_a_table_note_is_refused(board: Board, redis_url: str) -> None:
    await board.update_state(
        author=AUTHOR,
        uri=uri("tab"),
        digest="A table.",
        columns=["a"],
        rows=[["1"]],
        expect_version=0,
    )
    before = snapshot(redis_url)
    with pytest.raises(InvalidArgument) as info:
        await board.update_state(author=AUTHOR, uri=uri("tab"), digest="d", append="2")
    assert info.value.details["argument"] == "append"
    assert snapshot(redis_url) == before


async def test_append_with_expect_version_is_refused(board: Board, redis_url: str) -> None:
    await board.update_state(author=AUTHOR, uri=uri("log"), digest="d", body="a", expect_version=0)
    before = snapshot(redis_url)
    with pytest.raises(InvalidArgument) as info:
        await board.update_state(
            author=AUTHOR, uri=uri("log"), digest="d", append="b", expect_version=1
        )
    assert info.value.details["argument"] == "expect_version"
    assert snapshot(redis_url) == before


async def test_empty_append_is_refused(board: Board) -> None:
    with pytest.raises(InvalidArgument) as info:
        await board.update_state(author=AUTHOR, uri=uri("log"), digest="d", append="")
    assert info.value.details["argument"] == "append"


async def test_append_crossing_the_offload_threshold_moves_the_body_to_a_blob(
    board: Board, redis_url: str
) -> None:
    chunk = "line \u00e9\u6771 " * 100 + "\n"  # multibyte, about 1.3 KB a chunk
    expected = ""
    client = raw(redis_url)
    try:
        for _ in range(12):
            await board.update_state(author=AUTHOR, uri=uri("log"), digest="A log.", append=chunk)
            expected += chunk
            stored = client.hget("bbn:{ws}:t/log", "body").decode()
            blob = client.hget("bbn:{ws}:t/log", "blob").decode()
            if len(expected.encode()) > 10 * 1024:
                assert stored == ""
                assert client.get(f"bbb:{{ws}}:{blob}").decode() == expected
            else:
                assert stored == expected
                assert blob == ""
        assert len(client.keys("bbb:*")) == 1  # each longer blob replaced the previous one
    finally:
        client.close()
    body, version = await body_of(board, uri("log"))
    assert body == expected
    assert version == 12
