"""get_state: batched reads in five modes under an honest token budget."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from store_support import uri

from blackboard_mcp.store import (
    Board,
    GetState,
    InvalidArgument,
    LinkState,
    TiktokenCounter,
    UpdateState,
)

AUTHOR = "agent"
COUNTER = TiktokenCounter()
BASE = {"uri", "digest", "version", "est_tokens"}


def real_tokens(response: dict[str, Any]) -> int:
    return COUNTER.count(orjson.dumps(response).decode())


# A source must exist when it is named; it lives in a topic of its own, out of the way of
# the listings these tests make of topic "t".
ORIGIN = uri("origin", topic="src")


async def seed(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": ORIGIN, "digest": "Where it came from.", "body": "o"}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse(
            {
                "uri": uri("text"),
                "digest": "A text note.",
                "body": "Some body text.",
                "sources": [ORIGIN],
                "confidence": 0.75,
                "expect_version": 0,
            }
        ),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse(
            {
                "uri": uri("tab"),
                "digest": "Scores per team.",
                "columns": ["team", "score", "note"],
                "rows": [["red", 3, "ok"], ["blue", 5, "best"]],
                "expect_version": 0,
            }
        ),
        author=AUTHOR,
    )


async def one(board: Board, address: str, **kwargs: Any) -> dict[str, Any]:
    response = await board.get_state(GetState.parse({"uris": [address], **kwargs}))
    [item] = response["items"]
    return dict(item)


async def test_response_envelope_has_the_documented_keys(board: Board) -> None:
    await seed(board)
    response = await board.get_state(GetState.parse({"uris": [uri("text")]}))
    # get_state reports what it left out by position in ``uris`` (the caller holds the
    # addresses), not by repeating the addresses.
    assert set(response) == {
        "items",
        "spent_tokens",
        "truncated",
        "omitted",
        "omitted_at",
        "cursor",
    }
    assert (response["truncated"], response["omitted"], response["omitted_at"]) == (False, 0, [])
    assert response["cursor"] == 3  # the seed wrote three notes


async def test_digest_is_the_default_mode(board: Board) -> None:
    await seed(board)
    item = await one(board, uri("text"))
    assert set(item) == BASE | {"kind", "updated"}
    assert (item["digest"], item["version"], item["kind"]) == ("A text note.", 1, "text")
    assert item["updated"].endswith("Z")
    assert await one(board, uri("text"), mode="digest") == item


async def test_ref_mode_is_address_digest_version_and_size_only(board: Board) -> None:
    await seed(board)
    item = await one(board, uri("tab"), mode="ref")
    assert item == {
        "uri": uri("tab"),
        "digest": "Scores per team.",
        "version": 1,
        "est_tokens": item["est_tokens"],
    }


async def test_full_mode_of_a_text_note_has_body_and_metadata(board: Board) -> None:
    await seed(board)
    item = await one(board, uri("text"), mode="full")
    assert set(item) == BASE | {
        "kind",
        "author",
        "created",
        "updated",
        "size",
        "seq",
        "sources",
        "confidence",
        "body",
    }
    assert item["body"] == "Some body text."
    assert (item["author"], item["size"], item["seq"]) == (AUTHOR, 15, 2)
    assert (item["sources"], item["confidence"]) == ([ORIGIN], 0.75)


async def test_full_mode_of_a_table_note_has_its_columns_and_rows(board: Board) -> None:
    await seed(board)
    item = await one(board, uri("tab"), mode="full")
    assert item["rows"] == [["red", "3", "ok"], ["blue", "5", "best"]]
    assert (item["columns"], item["nrows"], item["kind"]) == (["team", "score", "note"], 2, "table")
    assert "body" not in item


async def test_table_mode_returns_the_columns_and_rows(board: Board) -> None:
    await seed(board)
    item = await one(board, uri("tab"), mode="table")
    assert set(item) == BASE | {"kind", "columns", "rows"}
    assert item["columns"] == ["team", "score", "note"]
    assert item["rows"] == [["red", "3", "ok"], ["blue", "5", "best"]]


async def test_table_mode_of_a_text_note_warns_and_gives_no_body(board: Board) -> None:
    await seed(board)
    response = await board.get_state(GetState.parse({"uris": [uri("text")], "mode": "table"}))
    [item] = response["items"]
    assert "rows" not in item and "body" not in item
    assert response["warnings"] == [f"{uri('text')} is not a table; read it with mode=full"]


async def test_fields_mode_returns_the_address_and_only_the_named_fields(board: Board) -> None:
    await seed(board)
    item = await one(board, uri("text"), mode="fields", fields=["author", "confidence", "links"])
    assert set(item) == {"uri", "author", "confidence", "links"}
    assert (item["author"], item["confidence"], item["links"]) == (AUTHOR, 0.75, [])
    assert "body" not in item


async def test_fields_mode_with_table_columns_returns_those_columns(board: Board) -> None:
    await seed(board)
    item = await one(board, uri("tab"), mode="fields", fields=["score", "team", "nrows"])
    # Columns come back in the order they were asked for.
    assert item["columns"] == ["score", "team"]
    assert item["rows"] == [["3", "red"], ["5", "blue"]]
    assert item["nrows"] == 2


async def test_fields_mode_warns_about_a_missing_column(board: Board) -> None:
    await seed(board)
    response = await board.get_state(
        GetState.parse({"uris": [uri("tab")], "mode": "fields", "fields": ["team", "colour"]})
    )
    assert response["items"][0]["rows"] == [["red"], ["blue"]]
    assert response["warnings"] == [f"{uri('tab')} has no column colour"]


async def test_missing_uris_are_reported_per_uri_without_failing_the_batch(board: Board) -> None:
    await seed(board)
    response = await board.get_state(
        GetState.parse({"uris": [uri("gone"), uri("text"), uri("also-gone")]})
    )
    items = response["items"]
    assert items[0] == {"uri": uri("gone"), "error": "not_found"}
    assert items[1]["digest"] == "A text note."
    assert items[2] == {"uri": uri("also-gone"), "error": "not_found"}
    assert response["truncated"] is False


async def test_duplicate_uris_are_collapsed(board: Board) -> None:
    await seed(board)
    response = await board.get_state(
        GetState.parse({"uris": [uri("text"), uri("tab"), uri("text"), uri("tab")]})
    )
    assert [i["uri"] for i in response["items"]] == [uri("text"), uri("tab")]


async def test_a_single_string_is_taken_as_one_uri(board: Board) -> None:
    await seed(board)
    response = await board.get_state(GetState.parse({"uris": uri("text")}))
    assert [i["uri"] for i in response["items"]] == [uri("text")]


async def test_est_tokens_is_counted_at_write_time(board: Board) -> None:
    body = "The quick brown fox jumps over the lazy dog. " * 20
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "Foxes.", "body": body}), author=AUTHOR
    )
    item = await one(board, uri("n"))
    assert item["est_tokens"] == COUNTER.count("Foxes.") + COUNTER.count(body)
    await board.update_state(
        UpdateState.parse({"uri": uri("n"), "digest": "Foxes.", "append": " And more."}),
        author=AUTHOR,
    )
    item = await one(board, uri("n"))
    assert item["est_tokens"] == COUNTER.count("Foxes.") + COUNTER.count(body + " And more.")


async def test_est_tokens_of_a_table_counts_its_tsv(board: Board) -> None:
    await seed(board)
    item = await one(board, uri("tab"))
    tsv = "team\tscore\tnote\nred\t3\tok\nblue\t5\tbest"
    # The table as a read returns it: inside a JSON string, tabs and newlines escaped.
    assert item["est_tokens"] == COUNTER.count("Scores per team.") + COUNTER.count(
        orjson.dumps(tsv).decode()[1:-1]
    )


async def budget_notes(board: Board, count: int) -> list[str]:
    addresses = [uri(f"n{i:02d}") for i in range(count)]
    for i, address in enumerate(addresses):
        await board.update_state(
            UpdateState.parse(
                {
                    "uri": address,
                    "digest": f"Note {i}.",
                    "body": f"Paragraph {i} " + "words and more words " * 30,
                }
            ),
            author=AUTHOR,
        )
    return addresses


async def test_budget_adds_items_in_order_until_the_next_would_exceed_it(board: Board) -> None:
    addresses = await budget_notes(board, 10)
    unlimited = await board.get_state(
        GetState.parse({"uris": addresses, "mode": "full", "budget_tokens": 100_000})
    )
    assert unlimited["truncated"] is False
    per_item = real_tokens({"items": [unlimited["items"][0]]}) - real_tokens({"items": []})

    budget = 700
    response = await board.get_state(
        GetState.parse({"uris": addresses, "mode": "full", "budget_tokens": budget})
    )
    shown = len(response["items"])
    assert 1 <= shown < 10
    assert response["items"] == unlimited["items"][:shown]
    assert response["omitted_at"] == [[shown, 9]]
    assert response["omitted"] == 10 - shown
    assert response["truncated"] is True
    assert response["spent_tokens"] <= budget
    # One more whole item would not have fitted.
    assert response["spent_tokens"] + per_item > budget
    assert all("cut" not in item for item in response["items"])


async def test_everything_after_the_first_omission_is_omitted(board: Board) -> None:
    # A big note first, then small ones: the small ones would fit but order is kept.
    await board.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "Small a.", "body": ""}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("big"), "digest": "Big.", "body": "word " * 2000}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("b"), "digest": "Small b.", "body": ""}), author=AUTHOR
    )
    response = await board.get_state(
        GetState.parse(
            {"uris": [uri("a"), uri("big"), uri("b")], "mode": "full", "budget_tokens": 300}
        )
    )
    assert [i["uri"] for i in response["items"]] == [uri("a")]
    assert response["omitted_at"] == [[1, 2]]
    assert response["truncated"] is True


async def test_a_single_item_over_budget_is_cut_at_a_clean_boundary(board: Board) -> None:
    paragraphs = [
        " ".join(f"Sentence {p}.{s} says something useful." for s in range(6)) for p in range(40)
    ]
    body = "\n\n".join(paragraphs)
    await board.update_state(
        UpdateState.parse({"uri": uri("long"), "digest": "Long.", "body": body}), author=AUTHOR
    )
    response = await board.get_state(
        GetState.parse({"uris": [uri("long")], "mode": "full", "budget_tokens": 300})
    )
    [item] = response["items"]
    head = item["body"]
    assert 0 < len(head) < len(body)
    assert body.startswith(head)
    assert body[len(head)] in " \n"  # the cut ends where a word, line or paragraph ends
    assert head.endswith(".")
    assert item["cut"]["shown_tokens"] == COUNTER.count(orjson.dumps(head).decode()[1:-1])
    assert item["cut"]["shown_tokens"] < item["cut"]["total_tokens"]
    assert item["cut"]["total_tokens"] == COUNTER.count(orjson.dumps(body).decode()[1:-1])
    assert response["truncated"] is True
    assert response["omitted_at"] == []
    assert response["spent_tokens"] <= 300


async def test_a_cut_prefers_a_paragraph_boundary(board: Board) -> None:
    body = "\n\n".join(["alpha " * 40, "beta " * 100, "gamma " * 400])
    await board.update_state(
        UpdateState.parse({"uri": uri("long"), "digest": "Long.", "body": body}), author=AUTHOR
    )
    [item] = (
        await board.get_state(
            GetState.parse({"uris": [uri("long")], "mode": "full", "budget_tokens": 300})
        )
    )["items"]
    assert item["body"] == "alpha " * 40 + "\n\n" + ("beta " * 100).rstrip()


@pytest.mark.parametrize("mode", ["digest", "ref", "full", "table", "fields"])
@pytest.mark.parametrize("budget", [150, 2000])
async def test_spent_tokens_is_within_ten_percent_of_the_real_count(
    board: Board, mode: str, budget: int
) -> None:
    await seed(board)
    addresses = await budget_notes(board, 6)
    await board.link_state(
        LinkState.parse({"src": uri("n00"), "rel": "supersedes", "dst": [uri("n01")]}),
        author=AUTHOR,
    )
    fields = ["author", "score", "links"] if mode == "fields" else None
    response = await board.get_state(
        GetState.parse(
            {
                "uris": [uri("tab"), uri("text"), *addresses, uri("missing")],
                "mode": mode,
                "fields": fields,
                "budget_tokens": budget,
            }
        )
    )
    real = real_tokens(response)
    assert abs(response["spent_tokens"] - real) <= 0.1 * real, (response["spent_tokens"], real)


async def test_spent_tokens_of_a_cut_item_is_within_ten_percent(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("long"), "digest": "Long.", "body": "word " * 3000}),
        author=AUTHOR,
    )
    response = await board.get_state(
        GetState.parse({"uris": [uri("long")], "mode": "full", "budget_tokens": 500})
    )
    assert "cut" in response["items"][0]
    real = real_tokens(response)
    assert abs(response["spent_tokens"] - real) <= 0.1 * real


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"mode": "summary"}, "mode"),
        ({"mode": "fields"}, "fields"),
        ({"mode": "fields", "fields": []}, "fields"),
        ({"fields": ["x"] * 33}, "fields"),
        ({"fields": "author"}, "fields"),
        ({"budget_tokens": 99}, "budget_tokens"),
        ({"budget_tokens": -5}, "budget_tokens"),
        ({"budget_tokens": 2000.0}, "budget_tokens"),
    ],
)
async def test_invalid_mode_fields_or_budget_is_refused(
    board: Board, kwargs: dict[str, Any], argument: str
) -> None:
    with pytest.raises(InvalidArgument) as info:
        await board.get_state(GetState.parse({"uris": [uri("text")], **kwargs}))
    assert info.value.details["argument"] == argument


async def test_smallest_and_largest_budgets_are_accepted(board: Board) -> None:
    await seed(board)
    for budget in (100, 100_000):
        response = await board.get_state(
            GetState.parse({"uris": [uri("text")], "budget_tokens": budget})
        )
        assert response["omitted"] + len(response["items"]) == 1


async def test_links_and_warnings_into_unreadable_topics_are_hidden(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("claim", topic="pub"), "digest": "Claim.", "body": ""}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("newer", topic="secret"), "digest": "Hidden.", "body": ""}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("doubt", topic="pub"), "digest": "Doubt.", "body": ""}),
        author=AUTHOR,
    )
    await board.link_state(
        LinkState.parse(
            {
                "src": uri("newer", topic="secret"),
                "rel": "supersedes",
                "dst": [uri("claim", topic="pub")],
            }
        ),
        author=AUTHOR,
    )
    await board.link_state(
        LinkState.parse(
            {
                "src": uri("doubt", topic="pub"),
                "rel": "contradicts",
                "dst": [uri("claim", topic="pub")],
            }
        ),
        author=AUTHOR,
    )

    everything = await board.get_state(
        GetState.parse({"uris": [uri("claim", topic="pub")], "mode": "full"})
    )
    assert everything["items"][0]["links"] == [
        {"rel": "contradicts", "from": uri("doubt", topic="pub")},
        {"rel": "supersedes", "from": uri("newer", topic="secret")},
    ]
    assert len(everything["warnings"]) == 2

    response = await board.get_state(
        GetState.parse({"uris": [uri("claim", topic="pub")], "mode": "full"}),
        readable=lambda t: t != "secret",
    )
    [item] = response["items"]
    assert item["links"] == [{"rel": "contradicts", "from": uri("doubt", topic="pub")}]
    assert response["warnings"] == [
        f"{uri('claim', topic='pub')} is contradicted by {uri('doubt', topic='pub')}"
    ]
    assert "secret" not in orjson.dumps(response).decode()

    fields = await board.get_state(
        GetState.parse(
            {"uris": [uri("claim", topic="pub")], "mode": "fields", "fields": ["links"]}
        ),
        readable=lambda t: t == "nothing",
    )
    assert fields["items"] == [{"uri": uri("claim", topic="pub"), "error": "forbidden"}]
    assert "secret" not in orjson.dumps(fields).decode()


async def test_sources_in_topics_the_reader_may_not_read_are_counted_not_named(
    board: Board,
) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("plan", topic="vault"), "digest": "d", "body": "b"}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("open", topic="pub"), "digest": "d", "body": "b"}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse(
            {
                "uri": uri("summary", topic="pub"),
                "digest": "A summary.",
                "body": "text",
                "sources": [uri("plan", topic="vault"), uri("open", topic="pub")],
            }
        ),
        author=AUTHOR,
    )
    everything = await board.get_state(
        GetState.parse({"uris": [uri("summary", topic="pub")], "mode": "full"})
    )
    assert everything["items"][0]["sources"] == [
        uri("plan", topic="vault"),
        uri("open", topic="pub"),
    ]
    assert "sources_hidden" not in everything["items"][0]

    for mode, fields in (("full", None), ("fields", ["sources"])):
        response = await board.get_state(
            GetState.parse({"uris": [uri("summary", topic="pub")], "mode": mode, "fields": fields}),
            readable=lambda t: t == "pub",
        )
        [item] = response["items"]
        assert item["sources"] == [uri("open", topic="pub")]
        assert "vault" not in orjson.dumps(response).decode()
        if mode == "full":
            assert item["sources_hidden"] == 1


async def test_missing_uris_count_against_the_budget_like_any_item(board: Board) -> None:
    missing = [uri(f"gone-{i}") for i in range(30)]
    response = await board.get_state(GetState.parse({"uris": missing, "budget_tokens": 100}))
    shown = [item["uri"] for item in response["items"]]
    assert all(item["error"] == "not_found" for item in response["items"])
    assert shown == missing[: len(shown)]
    assert response["omitted_at"] == [[len(shown), 29]]
    assert 0 < len(shown) < 30
    assert response["truncated"] is True and response["omitted"] == 30 - len(shown)
    generous = await board.get_state(GetState.parse({"uris": missing, "budget_tokens": 5000}))
    assert [item["uri"] for item in generous["items"]] == missing
    assert generous["truncated"] is False


async def test_fields_digest_and_version_are_fields_like_any_other(board: Board) -> None:
    await seed(board)
    response = await board.get_state(
        GetState.parse({"uris": [uri("text")], "mode": "fields", "fields": ["digest", "version"]})
    )
    assert response["items"] == [{"uri": uri("text"), "digest": "A text note.", "version": 1}]
    assert "warnings" not in response


ALL_FIELDS = [
    "uri",
    "digest",
    "version",
    "est_tokens",
    "kind",
    "updated",
    "author",
    "created",
    "size",
    "seq",
    "confidence",
    "sources",
    "links",
    "columns",
    "nrows",
    "origin",
]


@pytest.mark.parametrize("name", [*ALL_FIELDS, "body", "rows"])
async def test_every_key_a_read_returns_can_be_asked_for_by_name(board: Board, name: str) -> None:
    await seed(board)
    target = uri("tab") if name in ("rows", "columns", "nrows") else uri("text")
    full = await one(board, target, mode="full")
    item = await one(board, target, mode="fields", fields=[name])
    assert set(item) == {"uri", name}
    if name in full:
        assert item[name] == full[name]


async def test_table_mode_fields_select_the_columns(board: Board) -> None:
    await seed(board)
    response = await board.get_state(
        GetState.parse({"uris": [uri("tab")], "mode": "table", "fields": ["note", "team"]})
    )
    assert response["items"][0]["columns"] == ["note", "team"]
    assert response["items"][0]["rows"] == [["ok", "red"], ["best", "blue"]]
    missing = await board.get_state(
        GetState.parse({"uris": [uri("tab")], "mode": "table", "fields": ["team", "colour"]})
    )
    assert missing["items"][0]["rows"] == [["red"], ["blue"]]
    assert missing["warnings"] == [f"{uri('tab')} has no column colour"]


async def test_a_field_that_is_neither_a_key_nor_a_column_is_named_in_a_warning(
    board: Board,
) -> None:
    await seed(board)
    response = await board.get_state(
        GetState.parse({"uris": [uri("text")], "mode": "fields", "fields": ["digest", "colour"]})
    )
    assert response["items"] == [{"uri": uri("text"), "digest": "A text note."}]
    assert response["warnings"] == [f"{uri('text')}: no field colour"]
