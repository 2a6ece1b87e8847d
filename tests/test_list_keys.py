"""list_keys: what exists in a topic, in a chosen order, scoped to readable topics, pageable."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from store_support import WS, RoundTrips, uri

from blackboard_mcp.store import (
    Board,
    InvalidArgument,
    ListKeys,
    TiktokenCounter,
    UpdateState,
)

AUTHOR = "agent"
COUNTER = TiktokenCounter()


def uris(response: dict[str, Any]) -> list[str]:
    return [item["uri"] for item in response["items"]]


async def write(board: Board, path: str, times: int = 1, *, topic: str = "t") -> None:
    for _ in range(times):
        await board.update_state(
            UpdateState.parse(
                {"uri": uri(path, topic=topic), "digest": f"About {path}.", "body": ""}
            ),
            author=AUTHOR,
        )


async def three_notes(board: Board) -> None:
    await write(board, "bravo", 3)  # written first, version 3
    await write(board, "charlie", 1)
    await write(board, "alpha", 2)  # written last


async def test_default_order_is_most_recently_written_first(board: Board) -> None:
    await three_notes(board)
    response = await board.list_keys(ListKeys.parse({"topic": "t"}), workspace=WS)
    assert uris(response) == [uri("alpha"), uri("charlie"), uri("bravo")]
    assert response["items"][0] == {
        "uri": uri("alpha"),
        "digest": "About alpha.",
        "version": 2,
        "est_tokens": COUNTER.count("About alpha."),
        "kind": "text",
        "updated": response["items"][0]["updated"],
    }


async def test_rewriting_a_note_moves_it_to_the_front(board: Board) -> None:
    await three_notes(board)
    await write(board, "bravo")
    assert uris(await board.list_keys(ListKeys.parse({"topic": "t"}), workspace=WS))[0] == uri(
        "bravo"
    )


async def test_order_name_is_alphabetical(board: Board) -> None:
    await three_notes(board)
    response = await board.list_keys(ListKeys.parse({"topic": "t", "order": "name"}), workspace=WS)
    assert uris(response) == [uri("alpha"), uri("bravo"), uri("charlie")]


async def test_order_version_is_highest_version_first(board: Board) -> None:
    await three_notes(board)
    response = await board.list_keys(
        ListKeys.parse({"topic": "t", "order": "version"}), workspace=WS
    )
    assert [(i["uri"], i["version"]) for i in response["items"]] == [
        (uri("bravo"), 3),
        (uri("alpha"), 2),
        (uri("charlie"), 1),
    ]


async def test_kind_filter_lists_only_that_kind(board: Board) -> None:
    await three_notes(board)
    for name in ("t1", "t2"):
        await board.update_state(
            UpdateState.parse(
                {"uri": uri(name), "digest": "A table.", "columns": ["a"], "rows": [["1"]]}
            ),
            author=AUTHOR,
        )
    tables = await board.list_keys(ListKeys.parse({"topic": "t", "kind": "table"}), workspace=WS)
    assert uris(tables) == [uri("t2"), uri("t1")]
    texts = await board.list_keys(
        ListKeys.parse({"topic": "t", "kind": "text", "order": "name"}), workspace=WS
    )
    assert uris(texts) == [uri("alpha"), uri("bravo"), uri("charlie")]
    by_version = await board.list_keys(
        ListKeys.parse({"topic": "t", "kind": "text", "order": "version"}), workspace=WS
    )
    assert uris(by_version) == [uri("bravo"), uri("alpha"), uri("charlie")]
    assert (await board.list_keys(ListKeys.parse({"topic": "t", "kind": "summary"}), workspace=WS))[
        "items"
    ] == []


async def test_a_note_that_changes_kind_is_listed_under_its_new_kind_only(board: Board) -> None:
    await write(board, "x")
    await board.update_state(
        UpdateState.parse(
            {"uri": uri("x"), "digest": "Now a table.", "columns": ["a"], "rows": []}
        ),
        author=AUTHOR,
    )
    assert uris(
        await board.list_keys(ListKeys.parse({"topic": "t", "kind": "table"}), workspace=WS)
    ) == [uri("x")]
    assert (await board.list_keys(ListKeys.parse({"topic": "t", "kind": "text"}), workspace=WS))[
        "items"
    ] == []


async def test_limit_gives_next_and_after_continues_the_listing(board: Board) -> None:
    for i in range(5):
        await write(board, f"n{i}")
    limited = await board.list_keys(ListKeys.parse({"topic": "t", "limit": 3}), workspace=WS)
    assert uris(limited) == [uri("n4"), uri("n3"), uri("n2")]
    assert isinstance(limited["next"], str) and "more" not in limited
    rest = await board.list_keys(
        ListKeys.parse({"topic": "t", "limit": 3, "after": limited["next"]}), workspace=WS
    )
    assert uris(rest) == [uri("n1"), uri("n0")]
    assert "next" not in rest
    exact = await board.list_keys(ListKeys.parse({"topic": "t", "limit": 5}), workspace=WS)
    assert len(exact["items"]) == 5
    assert "next" not in exact
    named = await board.list_keys(
        ListKeys.parse({"topic": "t", "limit": 2, "order": "name"}), workspace=WS
    )
    assert uris(named) == [uri("n0"), uri("n1")]
    named = await board.list_keys(
        ListKeys.parse({"topic": "t", "limit": 2, "order": "name", "after": named["next"]}),
        workspace=WS,
    )
    assert uris(named) == [uri("n2"), uri("n3")]


async def test_table_mode_is_one_header_line_plus_tsv_rows(board: Board) -> None:
    await three_notes(board)
    response = await board.list_keys(ListKeys.parse({"topic": "t", "mode": "table"}), workspace=WS)
    assert response["items"] == []
    lines = response["table"].split("\n")
    assert lines[0] == "uri\tdigest\tversion\test_tokens"
    assert lines[1:] == [
        f"{uri('alpha')}\tAbout alpha.\t2\t{COUNTER.count('About alpha.')}",
        f"{uri('charlie')}\tAbout charlie.\t1\t{COUNTER.count('About charlie.')}",
        f"{uri('bravo')}\tAbout bravo.\t3\t{COUNTER.count('About bravo.')}",
    ]


async def test_table_mode_fields_select_the_columns_after_the_address(board: Board) -> None:
    await write(board, "a")
    response = await board.list_keys(
        ListKeys.parse({"topic": "t", "mode": "table", "fields": ["kind", "author"]}), workspace=WS
    )
    header, row = response["table"].split("\n")
    assert header == "uri\tkind\tauthor"
    assert row.split("\t") == [uri("a"), "text", AUTHOR]


async def test_table_mode_costs_fewer_tokens_than_digest_mode(board: Board) -> None:
    for i in range(10):
        await write(board, f"finding-{i}")
    table = await board.list_keys(ListKeys.parse({"topic": "t", "mode": "table"}), workspace=WS)
    digest = await board.list_keys(ListKeys.parse({"topic": "t", "mode": "digest"}), workspace=WS)
    assert len(table["table"].split("\n")) == 1 + len(digest["items"]) == 11
    assert table["spent_tokens"] < digest["spent_tokens"]
    real_table = COUNTER.count(orjson.dumps(table).decode())
    real_digest = COUNTER.count(orjson.dumps(digest).decode())
    assert real_table < real_digest


async def test_table_mode_respects_the_budget(board: Board) -> None:
    for i in range(30):
        await write(board, f"finding-{i:02d}")
    response = await board.list_keys(
        ListKeys.parse({"topic": "t", "mode": "table", "limit": 30, "budget_tokens": 200}),
        workspace=WS,
    )
    rows = response["table"].split("\n")[1:]
    assert 0 < len(rows) < 30
    assert response["omitted"] == 30 - len(rows)
    assert response["truncated"] is True
    assert response["spent_tokens"] <= 200
    listed = [row.split("\t")[0] for row in rows]
    while "next" in response:
        response = await board.list_keys(
            ListKeys.parse(
                {
                    "topic": "t",
                    "mode": "table",
                    "limit": 30,
                    "budget_tokens": 200,
                    "after": response["next"],
                }
            ),
            workspace=WS,
        )
        listed += [row.split("\t")[0] for row in response["table"].split("\n")[1:]]
    assert listed == [uri(f"finding-{i:02d}") for i in reversed(range(30))]


async def test_no_topic_lists_readable_topics_only_and_warns(board: Board) -> None:
    await write(board, "a", topic="plans")
    await write(board, "b", topic="secret")
    await write(board, "c", topic="facts")
    response = await board.list_keys(
        ListKeys.parse({}), workspace=WS, readable=lambda t: t != "secret"
    )
    assert uris(response) == [uri("c", topic="facts"), uri("a", topic="plans")]
    assert response["warnings"][0].startswith("no topic given")
    assert "(2)" in response["warnings"][0]
    assert "secret" not in orjson.dumps(response).decode()

    table = await board.list_keys(
        ListKeys.parse({"mode": "table"}), workspace=WS, readable=lambda t: t != "secret"
    )
    assert "secret" not in table["table"]
    assert table["warnings"][0].startswith("no topic given")


async def test_a_named_topic_lists_only_that_topic(board: Board) -> None:
    await write(board, "a", topic="plans")
    await write(board, "b", topic="facts")
    response = await board.list_keys(ListKeys.parse({"topic": "facts"}), workspace=WS)
    assert uris(response) == [uri("b", topic="facts")]
    assert "warnings" not in response


async def test_a_named_unreadable_topic_lists_nothing(board: Board) -> None:
    await write(board, "b", topic="secret")
    response = await board.list_keys(
        ListKeys.parse({"topic": "secret"}), workspace=WS, readable=lambda t: t != "secret"
    )
    assert response["items"] == []


async def test_other_workspaces_are_never_listed(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": "bb://other/t/x", "digest": "Theirs.", "body": ""}), author=AUTHOR
    )
    await write(board, "mine")
    assert uris(await board.list_keys(ListKeys.parse({"topic": "t"}), workspace=WS)) == [
        uri("mine")
    ]
    assert uris(await board.list_keys(ListKeys.parse({}), workspace=WS)) == [uri("mine")]


async def test_empty_topic_is_an_empty_listing(board: Board) -> None:
    response = await board.list_keys(ListKeys.parse({"topic": "nothing-here"}), workspace=WS)
    assert (response["items"], response["truncated"], response["cursor"]) == ([], False, 0)


async def test_paging_with_cursor_walks_every_change_once_in_seq_order(board: Board) -> None:
    for i in range(7):
        await write(board, f"a{i}")
        await write(board, f"b{i}", topic="other")
    await write(board, "a2")  # rewritten: it now belongs after everything else

    seen: list[tuple[str, int]] = []
    cursor = 0
    for _ in range(20):
        page = await board.list_keys(ListKeys.parse({"cursor": cursor, "limit": 4}), workspace=WS)
        seen.extend((i["uri"], i["version"]) for i in page["items"])
        assert page["cursor"] >= cursor
        cursor = page["cursor"]
        if "next" not in page:
            break
    expected_order = [
        uri(f"{'a' if n % 2 == 0 else 'b'}{n // 2}", topic="t" if n % 2 == 0 else "other")
        for n in range(14)
    ]
    expected_order.remove(uri("a2"))
    expected_order.append(uri("a2"))
    assert [u for u, _ in seen] == expected_order
    assert dict(seen)[uri("a2")] == 2
    assert cursor == 15

    later = await board.list_keys(ListKeys.parse({"cursor": cursor}), workspace=WS)
    assert later["items"] == []
    await write(board, "new")
    assert uris(await board.list_keys(ListKeys.parse({"cursor": cursor}), workspace=WS)) == [
        uri("new")
    ]


async def test_paging_with_a_small_budget_still_walks_every_change_once(board: Board) -> None:
    for i in range(12):
        await board.update_state(
            UpdateState.parse(
                {
                    "uri": uri(f"n{i:02d}"),
                    "digest": f"Note {i} " + "padding words " * 20,
                    "body": "",
                }
            ),
            author=AUTHOR,
        )
    seen: list[str] = []
    cursor = 0
    for _ in range(40):
        page = await board.list_keys(
            ListKeys.parse({"topic": "t", "cursor": cursor, "limit": 5, "budget_tokens": 250}),
            workspace=WS,
        )
        seen.extend(uris(page))
        assert page["items"], "a page made no progress"
        cursor = page["cursor"]
        if "next" not in page:
            break
    assert seen == [uri(f"n{i:02d}") for i in range(12)]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"order": "size"}, "order"),
        ({"kind": "image"}, "kind"),
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"limit": True}, "limit"),
        ({"mode": "full"}, "mode"),
        ({"cursor": -1}, "cursor"),
        ({"cursor": "10"}, "cursor"),
        ({"topic": "Bad Topic"}, "topic"),
        ({"budget_tokens": 1}, "budget_tokens"),
    ],
)
async def test_invalid_list_arguments_are_refused(
    board: Board, kwargs: dict[str, Any], argument: str
) -> None:
    with pytest.raises(InvalidArgument) as info:
        await board.list_keys(ListKeys.parse({**kwargs}), workspace=WS)
    assert info.value.details["argument"] == argument


async def test_digest_mode_fields_name_exactly_what_each_item_holds(board: Board) -> None:
    await write(board, "a")
    response = await board.list_keys(
        ListKeys.parse({"topic": "t", "fields": ["version", "author"]}), workspace=WS
    )
    assert response["items"] == [{"uri": uri("a"), "version": 1, "author": AUTHOR}]


async def test_content_is_not_a_listing_field(board: Board) -> None:
    with pytest.raises(InvalidArgument) as info:
        await board.list_keys(
            ListKeys.parse({"topic": "t", "mode": "table", "fields": ["body"]}), workspace=WS
        )
    assert info.value.details["argument"] == "fields"


async def _walk(board: Board, **args: Any) -> list[str]:
    seen: list[str] = []
    after = None
    for _ in range(100):
        page = await board.list_keys(ListKeys.parse({"after": after, **args}), workspace=WS)
        seen += uris(page)
        if "next" not in page:
            return seen
        after = page["next"]
    raise AssertionError("the listing does not end")


async def test_version_order_resumes_in_place_when_the_last_note_shown_is_rewritten(
    board: Board,
) -> None:
    for name in ("a", "b", "c", "d", "e"):
        await write(board, name)  # all at version 1: one run of ties, in name order
    page = await board.list_keys(
        ListKeys.parse({"topic": "t", "order": "version", "limit": 2}), workspace=WS
    )
    assert uris(page) == [uri("a"), uri("b")]
    await write(board, "b")  # b moves to version 2; its old place must still be found
    rest = await board.list_keys(
        ListKeys.parse({"topic": "t", "order": "version", "limit": 10, "after": page["next"]}),
        workspace=WS,
    )
    assert uris(rest) == [uri("c"), uri("d"), uri("e")]


async def test_kind_filtered_pages_over_several_topics_list_each_note_once(board: Board) -> None:
    expected = []
    for topic in ("t", "u"):
        for i in range(7):
            if i % 3 == 0:
                await board.update_state(
                    UpdateState.parse(
                        {
                            "uri": uri(f"x{i}", topic=topic),
                            "digest": "T.",
                            "columns": ["a"],
                            "rows": [["1"]],
                        }
                    ),
                    author=AUTHOR,
                )
                expected.append(uri(f"x{i}", topic=topic))
            else:
                await write(board, f"x{i}", topic=topic)
    for order in ("name", "version", "recent"):
        listed = await _walk(board, kind="table", order=order, limit=2)
        assert sorted(listed) == sorted(expected), order
        assert len(listed) == len(set(listed))
    named = await _walk(board, order="name", limit=3)
    assert named == sorted(named, key=lambda u: (u.split("/")[3], u.split("/", 4)[4]))
    assert len(named) == 14


async def test_a_change_feed_pages_with_next_like_any_listing(board: Board) -> None:
    for i in range(9):
        await write(board, f"c{i}")
    first = await board.list_keys(
        ListKeys.parse({"topic": "t", "cursor": 3, "limit": 2}), workspace=WS
    )
    assert uris(first) == [uri("c3"), uri("c4")]
    listed = uris(first)
    after = first["next"]
    while after:
        page = await board.list_keys(
            ListKeys.parse({"topic": "t", "cursor": 3, "limit": 2, "after": after}), workspace=WS
        )
        listed += uris(page)
        after = page.get("next")
    assert listed == [uri(f"c{i}") for i in range(3, 9)]


async def test_a_listing_of_every_topic_asks_them_all_in_one_round_trip(redis_url: str) -> None:
    # A round trip per topic held a connection and a task each: a workspace of thousands of
    # topics made one unfiltered listing hold the pool and the event loop for half a second.
    trips = RoundTrips()
    board = Board(client=trips.client(redis_url, also_redis_py=True))
    try:
        await board.start()
        for i in range(60):
            await write(board, "n", topic=f"t{i:02d}")
        for order in ({}, {"order": "name"}, {"order": "version"}, {"cursor": 0}):
            request = {"limit": 100, "budget_tokens": 100_000, **order}
            # Once before counting: a Redis that lacks a script the listing sends costs a
            # round trip more, once (tests/test_scripts_by_hash.py).
            await board.list_keys(ListKeys.parse(request), workspace=WS)
            trips.count = 0
            listing = await board.list_keys(ListKeys.parse(request), workspace=WS)
            assert sorted(uris(listing)) == [uri("n", topic=f"t{i:02d}") for i in range(60)]
            # The topics' names, their rows, the notes' fields.
            assert trips.count <= 3, (order, trips.count)
    finally:
        await board.close()
