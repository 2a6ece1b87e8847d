"""Compare-and-swap: a write lands only on the version it was based on; a refusal writes nothing."""

from __future__ import annotations

import asyncio

import pytest
from store_support import WS, ReadGate, gated_client, raw, snapshot, uri

from blackboard_mcp.store import Board, Conflict, GetState, ListKeys, UpdateState, board_client
from blackboard_mcp.store.connection._key_names import INDEX_NAME

AUTHOR = "agent-1"


async def read_full(board: Board, address: str) -> dict[str, object]:
    response = await board.get_state(GetState.parse({"uris": [address], "mode": "full"}))
    [item] = response["items"]
    return dict(item)


async def test_create_with_expect_version_zero_makes_version_one(board: Board) -> None:
    result = await board.update_state(
        UpdateState.parse(
            {"uri": uri("plan"), "digest": "The plan.", "body": "step 1", "expect_version": 0}
        ),
        author=AUTHOR,
    )
    assert result == {"version": 1, "digest": "The plan.", "warnings": []}
    item = await read_full(board, uri("plan"))
    assert (item["version"], item["digest"], item["body"], item["author"]) == (
        1,
        "The plan.",
        "step 1",
        AUTHOR,
    )


async def test_second_create_only_is_refused_with_current_version_and_digest(
    board: Board, redis_url: str
) -> None:
    await board.update_state(
        UpdateState.parse(
            {"uri": uri("plan"), "digest": "First digest.", "body": "first", "expect_version": 0}
        ),
        author=AUTHOR,
    )
    before = snapshot(redis_url)
    with pytest.raises(Conflict) as info:
        await board.update_state(
            UpdateState.parse(
                {"uri": uri("plan"), "digest": "Second.", "body": "second", "expect_version": 0}
            ),
            author="agent-2",
        )
    assert info.value.current_version == 1
    assert info.value.current_digest == "First digest."
    assert info.value.details == {"current_version": 1, "current_digest": "First digest."}
    assert info.value.code == "conflict"
    assert snapshot(redis_url) == before
    item = await read_full(board, uri("plan"))
    assert (item["version"], item["digest"], item["body"], item["author"]) == (
        1,
        "First digest.",
        "first",
        AUTHOR,
    )


async def test_stale_expect_version_is_refused_and_nothing_is_written(
    board: Board, redis_url: str
) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "v1", "body": "one", "expect_version": 0}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "v2", "body": "two", "expect_version": 1}),
        author=AUTHOR,
    )
    changes_before = await board.changes(WS)
    listing_before = await board.list_keys(
        ListKeys.parse({"topic": "t", "mode": "ref"}), workspace=WS
    )
    before = snapshot(redis_url)

    with pytest.raises(Conflict) as info:
        await board.update_state(
            UpdateState.parse(
                {"uri": uri("n"), "digest": "stale", "body": "three", "expect_version": 1}
            ),
            author=AUTHOR,
        )

    assert (info.value.current_version, info.value.current_digest) == (2, "v2")
    assert snapshot(redis_url) == before
    item = await read_full(board, uri("n"))
    assert (item["version"], item["digest"], item["body"]) == (2, "v2", "two")
    assert await board.changes(WS) == changes_before
    assert len(changes_before) == 2
    assert (
        await board.list_keys(ListKeys.parse({"topic": "t", "mode": "ref"}), workspace=WS)
        == listing_before
    )


async def test_expect_version_of_a_missing_note_is_refused(board: Board, redis_url: str) -> None:
    before = snapshot(redis_url)
    with pytest.raises(Conflict, match="does not exist") as info:
        await board.update_state(
            UpdateState.parse({"uri": uri("nope"), "digest": "d", "body": "", "expect_version": 3}),
            author=AUTHOR,
        )
    assert (info.value.current_version, info.value.current_digest) == (0, "")
    assert snapshot(redis_url) == before


async def test_expect_version_ahead_of_the_note_is_refused(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "v1", "body": "", "expect_version": 0}),
        author=AUTHOR,
    )
    with pytest.raises(Conflict) as info:
        await board.update_state(
            UpdateState.parse({"uri": uri("n"), "digest": "v9", "body": "", "expect_version": 5}),
            author=AUTHOR,
        )
    assert info.value.current_version == 1


async def test_write_without_expect_version_is_accepted_with_a_warning(board: Board) -> None:
    first = await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "d1", "body": "a"}), author=AUTHOR
    )
    second = await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "d2", "body": "b"}), author=AUTHOR
    )
    assert first["version"] == 1
    assert second["version"] == 2
    for result in (first, second):
        assert len(result["warnings"]) == 1
        assert "expect_version" in result["warnings"][0]
    assert (await read_full(board, uri("n")))["body"] == "b"


async def test_each_write_increments_the_version_by_one(board: Board) -> None:
    versions = []
    for expected in range(6):
        result = await board.update_state(
            UpdateState.parse(
                {
                    "uri": uri("n"),
                    "digest": f"d{expected}",
                    "body": str(expected),
                    "expect_version": expected,
                }
            ),
            author=AUTHOR,
        )
        versions.append(result["version"])
    assert versions == [1, 2, 3, 4, 5, 6]
    item = await read_full(board, uri("n"))
    assert (item["version"], item["body"]) == (6, "5")


async def test_two_clients_racing_on_one_version_exactly_one_wins(
    board: Board, redis_url: str
) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "base", "body": "", "expect_version": 0}),
        author=AUTHOR,
    )
    other = Board(client=board_client(redis_url))
    try:
        for round_ in range(20):
            base = round_ + 1
            results = await asyncio.gather(
                board.update_state(
                    UpdateState.parse(
                        {
                            "uri": uri("n"),
                            "digest": f"a{round_}",
                            "body": "",
                            "expect_version": base,
                        }
                    ),
                    author="a",
                ),
                other.update_state(
                    UpdateState.parse(
                        {
                            "uri": uri("n"),
                            "digest": f"b{round_}",
                            "body": "",
                            "expect_version": base,
                        }
                    ),
                    author="b",
                ),
                return_exceptions=True,
            )
            wins = [r for r in results if isinstance(r, dict)]
            losses = [r for r in results if isinstance(r, Conflict)]
            assert len(wins) == 1, results
            assert len(losses) == 1, results
            assert wins[0]["version"] == base + 1
            assert losses[0].current_version == base + 1
            assert losses[0].current_digest == wins[0]["digest"]
    finally:
        await other.close()
    item = await read_full(board, uri("n"))
    assert item["version"] == 21


async def test_many_tasks_that_all_read_one_version_before_any_commits_exactly_one_wins(
    board: Board, redis_url: str
) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "base", "body": "", "expect_version": 0}),
        author=AUTHOR,
    )
    racers = 10
    gate = ReadGate(racers)
    gated = Board(client=gated_client(redis_url, gate))
    try:
        results = await asyncio.gather(
            *(
                gated.update_state(
                    UpdateState.parse(
                        {"uri": uri("n"), "digest": f"d{i}", "body": "", "expect_version": 1}
                    ),
                    author=f"a{i}",
                )
                for i in range(racers)
            ),
            return_exceptions=True,
        )
        # Every racer read version 1 under WATCH before any of them reached EXEC.
        assert gate.reads == racers
        wins = [r for r in results if isinstance(r, dict)]
        assert len(wins) == 1, results
        losses = [r for r in results if isinstance(r, Conflict)]
        assert len(losses) == racers - 1, results
        assert all(c.current_version == 2 for c in losses), results
        item = await read_full(board, uri("n"))
        assert (item["version"], item["digest"]) == (2, wins[0]["digest"])
    finally:
        await gated.close()


async def test_appends_that_all_read_one_body_before_any_commits_lose_none(
    board: Board, redis_url: str
) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("log"), "digest": "log", "body": "start"}), author=AUTHOR
    )
    racers = 8
    gate = ReadGate(racers)
    gated = Board(client=gated_client(redis_url, gate))
    try:
        results = await asyncio.gather(
            *(
                gated.update_state(
                    UpdateState.parse({"uri": uri("log"), "digest": "log", "append": f" {i}"}),
                    author=f"a{i}",
                )
                for i in range(racers)
            )
        )
        assert gate.reads == racers
        assert sorted(r["version"] for r in results) == list(range(2, racers + 2))
        item = await read_full(board, uri("log"))
        assert item["version"] == racers + 1
        assert sorted(str(item["body"]).split()[1:]) == sorted(str(i) for i in range(racers))
    finally:
        await gated.close()


def _indexed_documents(url: str) -> int:
    """How many times the search index has (re)indexed a hash so far."""
    client = raw(url)
    try:
        info = client.ft(INDEX_NAME).info()
    finally:
        client.close()
    return int(info["max_doc_id"])


async def test_each_write_indexes_its_note_once(board: Board, redis_url: str) -> None:
    # The note, its sequence number and its times go in one HSET; each extra command on the
    # hash would make the search index read and index the whole note again.
    before = _indexed_documents(redis_url)
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "one", "body": "b", "expect_version": 0}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "two", "body": "c", "expect_version": 1}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "three", "append": " more"}), author=AUTHOR
    )
    assert _indexed_documents(redis_url) - before == 3
