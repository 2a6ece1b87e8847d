"""Every malformed write is refused before any I/O, with the class and argument a caller can fix."""

from __future__ import annotations

from typing import Any

import pytest
from store_support import dbsize, snapshot, uri

from blackboard_mcp.store import (
    Board,
    BoardLimits,
    GetState,
    InvalidArgument,
    LinkState,
    TooLarge,
    UpdateState,
    board_client,
    free_port,
)

GOOD: dict[str, Any] = {"uri": uri("note"), "digest": "A fine digest.", "body": "text"}

# (id, arguments replacing GOOD's, expected class, expected ``argument``)
CASES: list[tuple[str, dict[str, Any], type[InvalidArgument], str]] = [
    ("missing digest", {"digest": None}, InvalidArgument, "digest"),
    ("empty digest", {"digest": ""}, InvalidArgument, "digest"),
    ("blank digest", {"digest": "  \n\t "}, InvalidArgument, "digest"),
    ("oversized digest", {"digest": "d" * 1001}, TooLarge, "digest"),
    ("digest not a string", {"digest": 12}, InvalidArgument, "digest"),
    ("lone surrogate in digest", {"digest": "bad \ud800 digest"}, InvalidArgument, "digest"),
    # No content at all would empty the note's body: an empty body is said as body "".
    ("no content form", {"body": None}, InvalidArgument, "body"),
    ("body not a string", {"body": 12}, InvalidArgument, "body"),
    ("body a list", {"body": ["text"]}, InvalidArgument, "body"),
    ("body bytes", {"body": b"text"}, InvalidArgument, "body"),
    ("lone surrogate in body", {"body": "x\ud800y"}, InvalidArgument, "body"),
    ("lone surrogate in append", {"body": None, "append": "\udfff"}, InvalidArgument, "append"),
    ("negative expect_version", {"expect_version": -1}, InvalidArgument, "expect_version"),
    ("bool expect_version", {"expect_version": True}, InvalidArgument, "expect_version"),
    ("float expect_version", {"expect_version": 1.0}, InvalidArgument, "expect_version"),
    ("str expect_version", {"expect_version": "1"}, InvalidArgument, "expect_version"),
    (
        "row narrower than columns",
        {"body": None, "columns": ["a", "b"], "rows": [["1", "2"], ["3"]]},
        InvalidArgument,
        "rows",
    ),
    (
        "row wider than columns",
        {"body": None, "columns": ["a"], "rows": [["1", "2"]]},
        InvalidArgument,
        "rows",
    ),
    (
        "raw tab in a cell",
        {"body": None, "columns": ["a"], "rows": [["x\ty"]]},
        InvalidArgument,
        "rows",
    ),
    (
        "raw newline in a cell",
        {"body": None, "columns": ["a"], "rows": [["x\ny"]]},
        InvalidArgument,
        "rows",
    ),
    (
        "raw carriage return in a cell",
        {"body": None, "columns": ["a"], "rows": [["x\ry"]]},
        InvalidArgument,
        "rows",
    ),
    (
        "raw tab in a column name",
        {"body": None, "columns": ["a\tb"], "rows": []},
        InvalidArgument,
        "rows",
    ),
    ("empty columns", {"body": None, "columns": [], "rows": []}, InvalidArgument, "columns"),
    (
        "empty column name",
        {"body": None, "columns": ["a", ""], "rows": []},
        InvalidArgument,
        "columns",
    ),
    (
        "duplicate columns",
        {"body": None, "columns": ["a", "a"], "rows": [["1", "2"]]},
        InvalidArgument,
        "columns",
    ),
    ("columns without rows", {"body": None, "columns": ["a"]}, InvalidArgument, "columns"),
    ("rows without columns", {"body": None, "rows": [["1"]]}, InvalidArgument, "columns"),
    (
        "row not a list",
        {"body": None, "columns": ["a"], "rows": ["1"]},
        InvalidArgument,
        "rows",
    ),
    (
        "cell of a bad type",
        {"body": None, "columns": ["a"], "rows": [[{"x": 1}]]},
        InvalidArgument,
        "rows",
    ),
    ("body and append", {"append": "more"}, InvalidArgument, "append"),
    ("body and table", {"columns": ["a"], "rows": [["1"]]}, InvalidArgument, "columns"),
    (
        "table and append",
        {"body": None, "columns": ["a"], "rows": [["1"]], "append": "x"},
        InvalidArgument,
        "append",
    ),
    ("confidence above 1", {"confidence": 1.5}, InvalidArgument, "confidence"),
    ("confidence below 0", {"confidence": -0.1}, InvalidArgument, "confidence"),
    ("confidence NaN", {"confidence": float("nan")}, InvalidArgument, "confidence"),
    ("confidence infinite", {"confidence": float("inf")}, InvalidArgument, "confidence"),
    ("confidence a string", {"confidence": "0.5"}, InvalidArgument, "confidence"),
    ("confidence a bool", {"confidence": True}, InvalidArgument, "confidence"),
    ("sources not a list", {"sources": uri("x")}, InvalidArgument, "sources"),
    ("source with a bad address", {"sources": ["bb://ws/t/../x"]}, InvalidArgument, "sources"),
    ("source not a string", {"sources": [7]}, InvalidArgument, "sources"),
    ("source in another workspace", {"sources": ["bb://other/t/x"]}, InvalidArgument, "sources"),
    ("too many sources", {"sources": [uri(f"s{i}") for i in range(65)]}, TooLarge, "sources"),
    ("bad uri", {"uri": "bb://ws/t/"}, InvalidArgument, "uri"),
    ("uri not a string", {"uri": None}, InvalidArgument, "uri"),
    ("body over max_body_bytes", {"body": "x" * 4097}, TooLarge, "body"),
    ("multibyte body over max_body_bytes", {"body": "\u00e9" * 2049}, TooLarge, "body"),
    ("append over max_body_bytes", {"body": None, "append": "x" * 4097}, TooLarge, "append"),
    (
        "table over max_body_bytes",
        {"body": None, "columns": ["a"], "rows": [["x" * 1000]] * 5},
        TooLarge,
        "rows",
    ),
]


@pytest.fixture
async def small_board(board: Board) -> Board:
    """The test board with a 4 KB body limit, so oversize cases stay small."""
    return Board(placement=board.redis, limits=BoardLimits(max_body_bytes=4096))


@pytest.mark.parametrize(("case", "changes", "error", "argument"), CASES, ids=[c[0] for c in CASES])
async def test_bad_write_is_refused_and_writes_nothing(
    small_board: Board,
    redis_url: str,
    case: str,
    changes: dict[str, Any],
    error: type[InvalidArgument],
    argument: str,
) -> None:
    arguments = {**GOOD, **changes}
    assert dbsize(redis_url) == 0
    with pytest.raises(error) as info:
        await small_board.update_state(UpdateState.parse({**arguments}), author="agent")
    assert type(info.value) is error
    assert info.value.details["argument"] == argument
    assert info.value.message
    assert dbsize(redis_url) == 0

    # The same call against an existing note leaves every key exactly as it was.
    await small_board.update_state(UpdateState.parse({**GOOD, "expect_version": 0}), author="agent")
    before = snapshot(redis_url)
    with pytest.raises(error):
        await small_board.update_state(UpdateState.parse({**arguments}), author="agent")
    assert snapshot(redis_url) == before


async def test_the_good_write_used_above_is_accepted(small_board: Board) -> None:
    # The control case: without this, every refusal above could be refusing everything.
    result = await small_board.update_state(
        UpdateState.parse({**GOOD, "expect_version": 0}), author="agent"
    )
    assert result["version"] == 1


async def test_body_exactly_at_max_body_bytes_is_accepted(small_board: Board) -> None:
    result = await small_board.update_state(
        UpdateState.parse(
            {"uri": uri("edge"), "digest": "d", "body": "x" * 4096, "expect_version": 0}
        ),
        author="agent",
    )
    assert result["version"] == 1


async def test_digest_of_exactly_1000_characters_is_accepted(board: Board) -> None:
    result = await board.update_state(
        UpdateState.parse({"uri": uri("edge"), "digest": "d" * 1000, "body": ""}), author="agent"
    )
    assert result["version"] == 1


async def test_append_growing_past_max_body_bytes_is_refused_and_writes_nothing(
    small_board: Board, redis_url: str
) -> None:
    await small_board.update_state(
        UpdateState.parse({"uri": uri("log"), "digest": "d", "append": "x" * 3000}), author="agent"
    )
    before = snapshot(redis_url)
    with pytest.raises(TooLarge) as info:
        await small_board.update_state(
            UpdateState.parse({"uri": uri("log"), "digest": "d", "append": "y" * 1200}),
            author="agent",
        )
    assert info.value.details["argument"] == "append"
    assert snapshot(redis_url) == before


async def test_escaped_tab_and_newline_in_cells_are_stored_as_written(board: Board) -> None:
    await board.update_state(
        UpdateState.parse(
            {
                "uri": uri("tab"),
                "digest": "d",
                "columns": ["a", "b"],
                "rows": [["x\\ty", "line\\nbreak"], [1, None], [True, 2.5]],
                "expect_version": 0,
            }
        ),
        author="agent",
    )
    [item] = (await board.get_state(GetState.parse({"uris": [uri("tab")], "mode": "table"})))[
        "items"
    ]
    assert item["rows"] == [["x\\ty", "line\\nbreak"], ["1", ""], ["true", "2.5"]]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"rel": "likes"}, "rel"),
        ({"rel": None}, "rel"),
        ({"src": "nope"}, "src"),
        ({"dst": []}, "dst"),
        ({"dst": ["bb://ws/t/"]}, "dst"),
        ({"dst": ["bb://other/t/x"]}, "dst"),
        ({"dst": [uri(f"d{i}") for i in range(65)]}, "dst"),
        ({"dst": 5}, "dst"),
    ],
)
async def test_bad_link_is_refused_and_writes_nothing(
    board: Board, redis_url: str, kwargs: dict[str, Any], argument: str
) -> None:
    arguments = {"src": uri("a"), "rel": "cites", "dst": [uri("b")], **kwargs}
    with pytest.raises(InvalidArgument) as info:
        await board.link_state(LinkState.parse({**arguments}), author="agent")
    assert info.value.details["argument"] == argument
    assert dbsize(redis_url) == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"uris": []}, InvalidArgument, "uris"),
        ({"uris": None}, InvalidArgument, "uris"),
        ({"uris": ["bb://ws/T/k"]}, InvalidArgument, "topic"),
        ({"uris": [uri(f"k{i}") for i in range(101)]}, InvalidArgument, "uris"),
        ({"uris": [uri("a"), "bb://other/t/a"]}, InvalidArgument, "uris"),
        ({"mode": "everything"}, InvalidArgument, "mode"),
        ({"mode": "fields"}, InvalidArgument, "fields"),
        ({"fields": "kind"}, InvalidArgument, "fields"),
        ({"fields": [1]}, InvalidArgument, "fields"),
        ({"budget_tokens": 0}, InvalidArgument, "budget_tokens"),
        ({"budget_tokens": 100_001}, InvalidArgument, "budget_tokens"),
        ({"budget_tokens": "100"}, InvalidArgument, "budget_tokens"),
        ({"budget_tokens": True}, InvalidArgument, "budget_tokens"),
    ],
)
async def test_bad_read_arguments_are_refused_before_any_io(
    kwargs: dict[str, Any], error: type[InvalidArgument], argument: str
) -> None:
    # Nothing listens on this port: reaching Redis would raise Unavailable instead.
    board = Board(client=board_client(f"redis://127.0.0.1:{free_port()}"))
    try:
        with pytest.raises(error) as info:
            await board.get_state(GetState.parse({**{"uris": [uri("a")], **kwargs}}))
        assert info.value.details["argument"] == argument
    finally:
        await board.close()
