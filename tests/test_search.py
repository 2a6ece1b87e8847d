"""search_keys: words only, inside the caller's workspace and readable topics, whatever q holds."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_support import WS, uri

from blackboard_mcp.store import (
    Board,
    GetState,
    InvalidArgument,
    LinkState,
    SearchKeys,
    StoreError,
    TooLarge,
    UpdateState,
)
from blackboard_mcp.store.connection._key_names import INDEX_NAME, digest_index
from blackboard_mcp.store.search._query import build_query, parse_q

AUTHOR = "agent"


def found(response: dict[str, object]) -> list[str]:
    return [item["uri"] for item in response["items"]]  # type: ignore[attr-defined]


async def note(
    board: Board, path: str, digest: str, body: str = "", *, topic: str = "t", ws: str = WS
) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri(path, topic=topic, ws=ws), "digest": digest, "body": body}),
        author=AUTHOR,
    )


async def seed(board: Board) -> None:
    await note(board, "in-digest", "Kafka consumer lag explained.", "Unrelated words here.")
    await note(board, "in-body", "Operations notes.", "We measured kafka throughput today.")
    await note(board, "none", "Nothing relevant.", "Only other words.")
    await note(board, "hidden", "Kafka secrets: the password.", "kafka kafka", topic="secret")
    await note(board, "foreign", "Kafka in another workspace.", "kafka", ws="other")


async def test_finds_notes_by_digest_and_by_body(board: Board) -> None:
    await seed(board)
    response = await board.search_keys(SearchKeys.parse({"q": "kafka", "topic": "t"}), workspace=WS)
    assert set(found(response)) == {uri("in-digest"), uri("in-body")}
    for item in response["items"]:
        assert set(item) == {"uri", "digest", "score"}
        assert item["score"] > 0
    assert {i["digest"] for i in response["items"]} == {
        "Kafka consumer lag explained.",
        "Operations notes.",
    }


async def test_digest_matches_rank_above_body_only_matches(board: Board) -> None:
    await seed(board)
    response = await board.search_keys(SearchKeys.parse({"q": "kafka", "topic": "t"}), workspace=WS)
    assert found(response) == [uri("in-digest"), uri("in-body")]
    assert response["items"][0]["score"] > response["items"][1]["score"]


async def test_notes_matching_more_words_rank_higher(board: Board) -> None:
    await note(board, "one", "Redis tuning.")
    await note(board, "two", "Redis cluster tuning guide.")
    response = await board.search_keys(SearchKeys.parse({"q": "redis cluster guide"}), workspace=WS)
    assert found(response) == [uri("two"), uri("one")]


async def test_search_never_returns_the_body(board: Board) -> None:
    await seed(board)
    response = await board.search_keys(SearchKeys.parse({"q": "throughput"}), workspace=WS)
    assert response["items"] == [
        {
            "uri": uri("in-body"),
            "digest": "Operations notes.",
            "score": response["items"][0]["score"],
        }
    ]


async def test_topic_filter_limits_the_search_to_that_topic(board: Board) -> None:
    await seed(board)
    await note(board, "elsewhere", "Kafka elsewhere.", topic="ops")
    assert found(
        await board.search_keys(SearchKeys.parse({"q": "kafka", "topic": "ops"}), workspace=WS)
    ) == [uri("elsewhere", topic="ops")]


async def test_readable_predicate_applies_inside_the_query(board: Board) -> None:
    await seed(board)
    # Many matching notes in the unreadable topic: a filter applied after a limited query
    # would return fewer than `limit` results; a filter inside the query returns them all.
    for i in range(12):
        await note(board, f"h{i}", f"Kafka hidden {i}.", "kafka kafka kafka", topic="secret")
    for i in range(3):
        await note(board, f"v{i}", f"Visible {i}.", "kafka")
    response = await board.search_keys(
        SearchKeys.parse({"q": "kafka", "limit": 5}), workspace=WS, readable=lambda t: t != "secret"
    )
    assert len(response["items"]) == 5
    assert all("/secret/" not in u for u in found(response))
    everything = await board.search_keys(
        SearchKeys.parse({"q": "kafka", "limit": 50}), workspace=WS
    )
    assert sum("/secret/" in u for u in found(everything)) == 13


async def test_a_named_unreadable_topic_finds_nothing(board: Board) -> None:
    await seed(board)
    response = await board.search_keys(
        SearchKeys.parse({"q": "kafka", "topic": "secret"}),
        workspace=WS,
        readable=lambda t: t != "secret",
    )
    assert response["items"] == []


async def test_other_workspaces_are_never_searched(board: Board) -> None:
    await seed(board)
    assert "bb://other/" not in str(
        await board.search_keys(SearchKeys.parse({"q": "kafka workspace"}), workspace=WS)
    )
    assert found(await board.search_keys(SearchKeys.parse({"q": "kafka"}), workspace="other")) == [
        uri("foreign", topic="t", ws="other")
    ]


async def test_limit_caps_the_results(board: Board) -> None:
    for i in range(8):
        await note(board, f"n{i}", f"Kafka note {i}.")
    assert (
        len(
            (await board.search_keys(SearchKeys.parse({"q": "kafka", "limit": 3}), workspace=WS))[
                "items"
            ]
        )
        == 3
    )
    assert (
        len((await board.search_keys(SearchKeys.parse({"q": "kafka"}), workspace=WS))["items"]) == 8
    )


async def test_an_empty_result_is_a_valid_answer(board: Board) -> None:
    await seed(board)
    response = await board.search_keys(SearchKeys.parse({"q": "zeppelin"}), workspace=WS)
    assert response["items"] == []
    assert (response["truncated"], response["omitted"], response["omitted_uris"]) == (False, 0, [])
    assert "warnings" not in response
    assert response["spent_tokens"] > 0


async def test_an_empty_board_answers_with_no_results(board: Board) -> None:
    assert (await board.search_keys(SearchKeys.parse({"q": "anything"}), workspace=WS))[
        "items"
    ] == []


@pytest.mark.parametrize(
    "q", ["", "   ", "*", "-", "|", "()", "%%", "~", "\\", "the", "a an of", "_"]
)
async def test_a_query_with_no_searchable_words_is_empty_with_a_warning(
    board: Board, q: str
) -> None:
    await seed(board)
    response = await board.search_keys(SearchKeys.parse({"q": q}), workspace=WS)
    assert response["items"] == []
    assert response["warnings"] == ["q has no searchable words; nothing was searched"]


INJECTIONS = [
    "*",
    "@topic:{secret}",
    "@topic:{secret} kafka",
    "kafka @topic:{secret}",
    "-kafka",
    "kafka -nothing",
    "kafka | password",
    "kafka|password",
    '"kafka"',
    "'kafka'",
    "{kafka}",
    "}kafka{",
    "(kafka)",
    ")kafka(",
    "\\kafka",
    "kafka\\",
    "%kafka%",
    "~kafka",
    "@ws:{other}",
    "@ws:{other} kafka",
    "kafka) | (@topic:{secret}",
    "*) | (@topic:{secret} kafka",
    '@digest:"kafka"',
    "kafka => {$weight: 100}",
    "@ws:{*}",
    "kafka\x00secret",
    "ka*",
    "%%kafka%%",
    "$param",
    "kafka\n@topic:{secret}",
]


@pytest.mark.parametrize("q", INJECTIONS)
async def test_query_syntax_in_q_never_reaches_other_topics_or_workspaces(
    board: Board, q: str
) -> None:
    await seed(board)
    response = await board.search_keys(
        SearchKeys.parse({"q": q}), workspace=WS, readable=lambda t: t != "secret"
    )
    results = found(response)
    assert all(u.startswith(f"bb://{WS}/t/") for u in results), results
    assert "password" not in str(response)
    if "kafka" in q and "-kafka" not in q:
        # Every word of q is searched, so other plain words ("other", "nothing") may add
        # notes of this topic; the kafka notes are always there (unless q excludes them).
        assert {uri("in-digest"), uri("in-body")} <= set(results)


@pytest.mark.parametrize("q", INJECTIONS)
async def test_query_syntax_in_q_raises_nothing_but_our_errors(board: Board, q: str) -> None:
    await seed(board)
    try:
        await board.search_keys(SearchKeys.parse({"q": q, "topic": "t"}), workspace=WS)
    except StoreError as exc:  # pragma: no cover - any of ours would be a refusal, not a leak
        assert isinstance(exc, InvalidArgument), exc


async def test_query_of_exactly_the_limit_is_allowed(board: Board) -> None:
    await seed(board)
    q = ("kafka " * 2000)[:10_000]
    assert len(q) == 10_000
    assert set(
        found(await board.search_keys(SearchKeys.parse({"q": q, "topic": "t"}), workspace=WS))
    ) == {
        uri("in-digest"),
        uri("in-body"),
    }


async def test_query_over_the_limit_is_too_large(board: Board) -> None:
    with pytest.raises(TooLarge) as info:
        await board.search_keys(SearchKeys.parse({"q": "x" * 10_001}), workspace=WS)
    assert info.value.details["argument"] == "q"
    with pytest.raises(TooLarge):
        await board.search_keys(
            SearchKeys.parse({"q": "word " * 2048}), workspace=WS
        )  # 10 KB of text


async def test_many_distinct_words_are_accepted(board: Board) -> None:
    await seed(board)
    q = " ".join(f"w{i}" for i in range(500)) + " kafka"
    # Only the first 32 distinct words are searched; kafka comes after them.
    assert (await board.search_keys(SearchKeys.parse({"q": q}), workspace=WS))["items"] == []
    assert (
        found(
            await board.search_keys(
                SearchKeys.parse({"q": "kafka " + q, "topic": "t"}), workspace=WS
            )
        )
        != []
    )


@pytest.mark.parametrize(
    ("word", "path"),
    [
        ("caf\u00e9", "fr"),
        ("\u6771\u4eac", "jp"),
        ("stra\u00dfe", "de"),
        ("\u0436\u0443\u0440\u043d\u0430\u043b", "ru"),
    ],
)
async def test_unicode_words_are_found(board: Board, word: str, path: str) -> None:
    await note(board, "fr", "Un caf\u00e9 au lait.")
    await note(board, "jp", "\u6771\u4eac \u30bf\u30ef\u30fc")
    await note(board, "de", "Die Stra\u00dfe ist lang.")
    await note(
        board,
        "ru",
        "\u0436\u0443\u0440\u043d\u0430\u043b \u0441\u043e\u0431\u044b\u0442\u0438\u0439",
    )
    assert found(await board.search_keys(SearchKeys.parse({"q": word}), workspace=WS)) == [
        uri(path)
    ]


async def test_search_is_case_insensitive(board: Board) -> None:
    await seed(board)
    assert set(
        found(await board.search_keys(SearchKeys.parse({"q": "KAFKA", "topic": "t"}), workspace=WS))
    ) == {
        uri("in-digest"),
        uri("in-body"),
    }


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"q": None}, InvalidArgument, "q"),
        ({"q": 5}, InvalidArgument, "q"),
        ({"q": "bad \ud800"}, InvalidArgument, "q"),
        ({"q": "x", "limit": 0}, InvalidArgument, "limit"),
        ({"q": "x", "limit": 51}, InvalidArgument, "limit"),
        ({"q": "x", "limit": True}, InvalidArgument, "limit"),
        ({"q": "x", "topic": "Bad"}, InvalidArgument, "topic"),
    ],
)
async def test_invalid_search_arguments_are_refused(
    board: Board, kwargs: dict[str, object], error: type[InvalidArgument], argument: str
) -> None:
    with pytest.raises(error) as info:
        await board.search_keys(SearchKeys.parse({**kwargs}), workspace=WS)
    assert info.value.details["argument"] == argument


@pytest.mark.parametrize("index", [INDEX_NAME, digest_index(INDEX_NAME)], ids=["notes", "digests"])
async def test_search_works_after_the_index_was_dropped(board: Board, index: str) -> None:
    await seed(board)
    await board.client.execute_command("FT.DROPINDEX", index)
    # The index is rebuilt from the notes on the first search that misses it, and that
    # search answers from the whole rebuilt index, not from the part scanned so far.
    response = await board.search_keys(SearchKeys.parse({"q": "kafka", "topic": "t"}), workspace=WS)
    assert set(found(response)) == {uri("in-digest"), uri("in-body")}
    assert "warnings" not in response


@pytest.mark.parametrize("q", ["ismissing", "ISMISSING", "otter ismissing"])
async def test_words_the_query_parser_reserves_are_searched_as_plain_words(
    board: Board, q: str
) -> None:
    await note(board, "reserved", "The ismissing flag of otters.", "otter census")
    await note(board, "other", "Nothing relevant.", "Only other words.")
    response = await board.search_keys(SearchKeys.parse({"q": q}), workspace=WS)
    assert found(response) == [uri("reserved")]


async def test_stemming_still_applies_to_ordinary_words(board: Board) -> None:
    await note(board, "runner", "She was running late.", "")
    response = await board.search_keys(SearchKeys.parse({"q": "runs"}), workspace=WS)
    assert found(response) == [uri("runner")]


async def test_every_topic_search_finds_what_a_topic_filtered_one_does(board: Board) -> None:
    # every_topic leaves the topic filter out of the query; an equivalent predicate keeps it.
    await seed(board)
    unfiltered = await board.search_keys(
        SearchKeys.parse({"q": "kafka", "limit": 50}), workspace=WS
    )
    filtered = await board.search_keys(
        SearchKeys.parse({"q": "kafka", "limit": 50}), workspace=WS, readable=lambda _topic: True
    )
    assert sorted(found(unfiltered)) == sorted(found(filtered))
    assert sorted(found(unfiltered)) == sorted(
        [uri("in-digest"), uri("in-body"), uri("hidden", topic="secret")]
    )


async def test_a_stale_hit_carries_the_warnings_of_a_read_each_link_said_once(board: Board) -> None:
    await note(board, "old", "Kafka retention is seven days.")
    await note(board, "new", "Kafka retention is now three days.")
    await note(board, "doubt", "Kafka retention was never seven days.")
    await note(board, "hidden-doubt", "Kafka retention doubts.", topic="secret")
    await board.link_state(
        LinkState.parse({"src": uri("new"), "rel": "supersedes", "dst": [uri("old")]}),
        author=AUTHOR,
    )
    await board.link_state(
        LinkState.parse({"src": uri("doubt"), "rel": "contradicts", "dst": [uri("old")]}),
        author=AUTHOR,
    )
    await board.link_state(
        LinkState.parse(
            {"src": uri("hidden-doubt", topic="secret"), "rel": "contradicts", "dst": [uri("old")]}
        ),
        author=AUTHOR,
    )
    readable = lambda topic: topic != "secret"  # noqa: E731
    response = await board.search_keys(
        SearchKeys.parse({"q": "kafka retention"}), workspace=WS, readable=readable
    )
    read = await board.get_state(GetState.parse({"uris": [uri("old")]}), readable=readable)
    assert uri("old") in found(response)
    assert read["warnings"] == [
        f"{uri('old')} is superseded by {uri('new')}",
        f"{uri('old')} is contradicted by {uri('doubt')}",
    ]
    # Both ends of the contradiction are hits: the link is said once, from the side that
    # contradicts; the hit alone in a read (above) is told from its own side.
    stale = [w for w in response["warnings"] if w.startswith(uri("old"))]
    assert stale == [f"{uri('old')} is superseded by {uri('new')}"]
    assert f"{uri('doubt')} contradicts {uri('old')}" in response["warnings"]
    assert "secret" not in str(response)


async def write_notes(board: Board, notes: dict[str, tuple[str, str]]) -> None:
    for name, (digest, body) in notes.items():
        await board.update_state(
            UpdateState.parse({"uri": uri(name), "digest": digest, "body": body}),
            author=AUTHOR,
        )


async def hits_and_warnings(board: Board, q: str) -> tuple[list[str], list[str]]:
    response = await board.search_keys(SearchKeys.parse({"q": q}), workspace=WS)
    names = [i["uri"].rsplit("/", 1)[1] for i in response["items"]]
    return names, response.get("warnings", [])


SYNTAX_BOARD = {
    "lag-wal": ("Replica lag grows on db-2.", "The WAL sender is slow."),
    "lag-disk": ("Lag on db-3.", "The disk is full."),
    "report": ("Weekly report.", "Nothing new this week."),
    "reversed": ("The lag of the replica.", "Seen twice."),
    "other": ("Cache stampede.", "Warm the cache first."),
}


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("lag -disk", {"lag-wal", "reversed"}),
        ("rep*", {"lag-wal", "report", "reversed"}),
        ('"replica lag"', {"lag-wal"}),
        ("\u201creplica lag\u201d -wal", set()),
        ('lag -"wal sender"', {"lag-disk", "reversed"}),
    ],
)
async def test_prefixes_exclusions_and_phrases_do_what_they_say(
    board: Board, q: str, expected: set[str]
) -> None:
    await write_notes(board, SYNTAX_BOARD)
    names, warnings = await hits_and_warnings(board, q)
    assert set(names) == expected, (q, names)
    assert warnings == [], warnings


@pytest.mark.parametrize(
    ("q", "warning"),
    [
        ("r* lag", "a prefix needs at least 2 letters before *: r* was left out"),
        ("-disk", "q only excludes (-disk); give a word to search for"),
        ('"', "q has no searchable words; nothing was searched"),
    ],
)
async def test_what_cannot_be_searched_is_said_never_silently_empty(
    board: Board, q: str, warning: str
) -> None:
    await write_notes(board, SYNTAX_BOARD)
    _, warnings = await hits_and_warnings(board, q)
    assert warnings == [warning]


async def test_notes_holding_every_word_rank_above_notes_holding_some(board: Board) -> None:
    await write_notes(
        board,
        {
            # Two of the words, in the digest, which alone would score highest.
            "two-in-digest": ("Replica lag, replica lag.", "Replica lag everywhere."),
            "all-in-body": ("Incident 7.", "Replica lag grew while the WAL archive was slow."),
            "one": ("WAL archive size.", "Archive."),
        },
    )
    names, _ = await hits_and_warnings(board, "replica lag WAL")
    assert names == ["all-in-body", "two-in-digest", "one"]


async def test_scores_are_rounded_to_four_significant_digits(board: Board) -> None:
    for name in ("a", "b"):
        await board.update_state(
            UpdateState.parse({"uri": uri(name), "digest": f"Zebra {name}.", "body": "zebra"}),
            author=AUTHOR,
        )
    response = await board.search_keys(SearchKeys.parse({"q": "zebra"}), workspace=WS)
    for item in response["items"]:
        assert item["score"] == float(f"{item['score']:.4g}")
        assert len(repr(item["score"]).replace(".", "").lstrip("0")) <= 5
    plain = await board.search_keys(SearchKeys.parse({"q": "zebra"}), workspace=WS)
    assert "warnings" not in plain


# What the server may put around the caller's words: grouping, alternatives, prefix stars,
# exclusion minus signs and the quotes around a reserved word. Nothing else of q gets through.
_QUERY_AFTER_FILTERS = re.compile(r"[\w \|\*\-\(\)\"]*", re.UNICODE)


@given(st.text(max_size=200))
def test_q_reaches_the_parser_as_words_and_the_servers_operators_only(q: str) -> None:
    parsed = parse_q(q)
    if not parsed.searchable:
        assert parsed.notices
        return
    for every in (True, False):
        query = build_query("ws", ["t"], parsed, every=every)
        head = "@ws:{ws} @topic:{t} "
        assert query.startswith(head)
        assert _QUERY_AFTER_FILTERS.fullmatch(query[len(head) :]), query
        assert "@" not in query[len(head) :] and "{" not in query[len(head) :]


@pytest.mark.parametrize("shape", ["{}-", "{}", "{}-a*", "-{}x", '"{}'])
def test_reading_q_takes_time_in_proportion_to_its_length(shape: str) -> None:
    # q is read on the event loop: a reading that grows with the square of a word's length
    # (a backtracking pattern) holds every other call up for a second at the 10,000-character
    # limit. Compared with itself at a tenth of the length, in one run, so the machine's own
    # speed drops out: linear is about 10x, quadratic about 100x.
    def cost(length: int) -> float:
        q = shape.format("é" * length)
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            parse_q(q)
            best = min(best, time.perf_counter() - started)
        return best

    assert cost(9_990) < 30 * cost(999)


def test_q_holds_at_most_32_parts_whatever_their_kind() -> None:
    # Each part costs the query, and each phrase a scan of every candidate's text: excluded
    # phrases count like the rest.
    q = " ".join([f'"w{n} x{n}" -"y{n} z{n}" -v{n} p{n}*' for n in range(500)])[:10_000]
    parsed = parse_q(q)
    parts = [*parsed.words, *parsed.prefixes, *parsed.excluded]
    phrase_words = [w for p in (*parsed.phrases, *parsed.excluded_phrases) for w in p]
    assert len(parts) + len(phrase_words) <= 32, parsed


async def test_a_quote_left_open_asks_for_the_rest_of_q_as_a_phrase(board: Board) -> None:
    await write_notes(
        board,
        {
            "in-order": ("Replica lag grew.", "Body."),
            "apart": ("Lag on the replica.", "Body."),
        },
    )
    names, _ = await hits_and_warnings(board, '"replica lag')
    assert names == ["in-order"]
    names, _ = await hits_and_warnings(board, "replica lag")
    assert sorted(names) == ["apart", "in-order"]
