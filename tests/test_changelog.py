"""The change log: one entry per committed write, numbered in commit order, capped in length."""

from __future__ import annotations

import asyncio

import pytest
from store_support import WS, raw, uri

from blackboard_mcp.store import (
    Board,
    BoardLimits,
    Conflict,
    GetState,
    LinkState,
    ListKeys,
    SearchKeys,
    UpdateState,
    board_client,
)

AUTHOR = "agent-7"


async def test_every_kind_of_write_adds_one_entry(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A.", "body": "x", "expect_version": 0}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A2.", "body": "y", "expect_version": 1}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A3.", "append": "z"}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("b"), "digest": "B.", "body": "", "expect_version": 0}),
        author=AUTHOR,
    )
    await board.link_state(
        LinkState.parse({"src": uri("a"), "rel": "cites", "dst": [uri("b")]}), author="linker"
    )

    entries = list(reversed(await board.changes(WS)))
    assert [(e["seq"], e["op"], e["uri"], e["version"], e["author"]) for e in entries] == [
        ("1", "create", uri("a"), "1", AUTHOR),
        ("2", "update", uri("a"), "2", AUTHOR),
        ("3", "append", uri("a"), "3", AUTHOR),
        ("4", "create", uri("b"), "1", AUTHOR),
        ("5", "link", uri("a"), "0", "linker"),
    ]
    assert all(int(e["at"]) > 1_600_000_000_000 for e in entries)  # server time, in ms


async def test_the_note_records_the_seq_of_its_latest_write(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A.", "body": ""}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("b"), "digest": "B.", "body": ""}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A again.", "body": ""}), author=AUTHOR
    )
    response = await board.get_state(
        GetState.parse({"uris": [uri("a"), uri("b")], "fields": ["seq"], "mode": "fields"})
    )
    assert [(i["uri"], i["seq"]) for i in response["items"]] == [(uri("a"), 3), (uri("b"), 2)]


async def test_refused_writes_add_no_entry(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A.", "body": "", "expect_version": 0}),
        author=AUTHOR,
    )
    for _ in range(3):
        with pytest.raises(Conflict):
            await board.update_state(
                UpdateState.parse(
                    {"uri": uri("a"), "digest": "x", "body": "", "expect_version": 0}
                ),
                author=AUTHOR,
            )
    assert len(await board.changes(WS)) == 1


async def test_seq_strictly_increases_in_commit_order_under_concurrency(
    board: Board, redis_url: str
) -> None:
    boards = [Board(client=board_client(redis_url)) for _ in range(4)]
    try:
        await asyncio.gather(
            *(
                b.update_state(
                    UpdateState.parse({"uri": uri(f"k{n}-{i}"), "digest": "d", "body": ""}),
                    author=f"w{n}",
                )
                for n, b in enumerate(boards)
                for i in range(15)
            ),
            *(
                board.update_state(
                    UpdateState.parse({"uri": uri("log"), "digest": "d", "append": "."}),
                    author="log",
                )
                for _ in range(15)
            ),
        )
    finally:
        for b in boards:
            await b.close()
    client = raw(redis_url)
    try:
        # Stream order is commit order; seq must follow it with no gap and no repeat.
        entries = client.xrange(f"bbc:{{{WS}}}")
    finally:
        client.close()
    seqs = [int(fields[b"seq"]) for _id, fields in entries]
    assert seqs == list(range(1, 76))
    log_versions = [int(f[b"version"]) for _id, f in entries if f[b"uri"] == uri("log").encode()]
    assert log_versions == list(range(1, 16))


async def test_cursor_of_every_read_is_the_latest_seq(board: Board) -> None:
    for i in range(4):
        await board.update_state(
            UpdateState.parse({"uri": uri(f"k{i}"), "digest": f"word{i} alpha", "body": ""}),
            author=AUTHOR,
        )
    await board.link_state(
        LinkState.parse({"src": uri("k0"), "rel": "cites", "dst": [uri("k1")]}), author=AUTHOR
    )
    latest = int((await board.changes(WS, count=1))[0]["seq"])
    assert latest == 5
    assert (await board.get_state(GetState.parse({"uris": [uri("k0")]})))["cursor"] == latest
    assert (await board.list_keys(ListKeys.parse({"topic": "t"}), workspace=WS))["cursor"] == latest
    assert (await board.list_keys(ListKeys.parse({"topic": "t", "mode": "table"}), workspace=WS))[
        "cursor"
    ] == latest
    assert (await board.search_keys(SearchKeys.parse({"q": "alpha"}), workspace=WS))[
        "cursor"
    ] == latest


async def test_cursor_is_zero_for_an_empty_workspace(board: Board) -> None:
    assert (await board.list_keys(ListKeys.parse({"topic": "t"}), workspace="empty"))["cursor"] == 0
    response = await board.get_state(GetState.parse({"uris": ["bb://empty/t/k"]}))
    assert response["cursor"] == 0
    assert response["items"] == [{"uri": "bb://empty/t/k", "error": "not_found"}]


async def test_workspaces_have_separate_sequences(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": "bb://one/t/a", "digest": "d", "body": ""}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": "bb://one/t/b", "digest": "d", "body": ""}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": "bb://two/t/a", "digest": "d", "body": ""}), author=AUTHOR
    )
    assert [e["seq"] for e in await board.changes("one")] == ["2", "1"]
    assert [e["seq"] for e in await board.changes("two")] == ["1"]


async def test_change_log_is_capped_near_its_maxlen(redis_url: str) -> None:
    cap = 50
    board = Board(client=board_client(redis_url), limits=BoardLimits(changelog_maxlen=cap))
    try:
        await board.start()
        for i in range(300):
            await board.update_state(
                UpdateState.parse({"uri": uri(f"k{i % 7}"), "digest": "d", "body": ""}),
                author=AUTHOR,
            )
        await board.link_state(
            LinkState.parse({"src": uri("k0"), "rel": "cites", "dst": [uri("k1")]}), author=AUTHOR
        )
        client = raw(redis_url)
        try:
            length = client.xlen(f"bbc:{{{WS}}}")
        finally:
            client.close()
        # MAXLEN ~ trims whole stream nodes (100 entries by default), so allow that much slack.
        assert cap <= length <= cap + 100
        newest = await board.changes(WS, count=1)
        assert newest[0]["seq"] == "301"
        assert newest[0]["op"] == "link"
    finally:
        await board.close()
