"""spent_tokens is what the response really costs, in every listing mode."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blackboard_mcp.store import (
    Board,
    GetState,
    ListKeys,
    TiktokenCounter,
    UpdateState,
    board_client,
)
from blackboard_mcp.store.reads._budget import finish

_COUNTER = TiktokenCounter()


@pytest.mark.parametrize("mode", ["digest", "table", "ref"])
async def test_list_keys_spent_tokens_matches_the_serialised_response(
    board: Board, mode: str
) -> None:
    for i in range(12):
        await board.update_state(
            UpdateState.parse(
                {"uri": f"bb://w/t/n{i}", "digest": f"note {i} on caches", "body": "b" * 50}
            ),
            author="a",
        )
    response = await board.list_keys(ListKeys.parse({"topic": "t", "mode": mode}), workspace="w")
    real = TiktokenCounter().count(orjson.dumps(response).decode())
    # Item costs are counted as each item is added, so the sum may run a little over the
    # exact count of the whole, never meaningfully under it.
    assert real * 0.95 <= response["spent_tokens"] <= real * 1.10 + 3, (mode, real)


async def test_table_mode_costs_about_half_of_the_same_rows_as_json(board: Board) -> None:
    for i in range(20):
        await board.update_state(
            UpdateState.parse(
                {"uri": f"bb://w/t/n{i}", "digest": f"finding {i} about replica lag", "body": "x"}
            ),
            author="a",
        )
    as_json = await board.list_keys(ListKeys.parse({"topic": "t", "mode": "digest"}), workspace="w")
    as_table = await board.list_keys(ListKeys.parse({"topic": "t", "mode": "table"}), workspace="w")
    assert as_table["spent_tokens"] < 0.7 * as_json["spent_tokens"]


@given(
    items=st.lists(
        st.fixed_dictionaries(
            {
                "uri": st.from_regex(r"bb://w/t/[a-z0-9]{1,8}", fullmatch=True),
                "digest": st.text(max_size=200),
                "links": st.lists(st.from_regex(r"bb://w/[a-z]{1,3}/[0-9]{1,3}", fullmatch=True)),
            }
        ),
        max_size=20,
    ),
    warnings=st.lists(st.text(max_size=300), max_size=3),
)
def test_spent_tokens_is_the_exact_count_of_the_answer_that_holds_it(
    items: list[dict[str, Any]], warnings: list[str]
) -> None:
    response: dict[str, Any] = {"items": items, "spent_tokens": 0, "warnings": warnings}
    spent = finish(_COUNTER, response)
    assert response["spent_tokens"] == spent
    assert spent == _COUNTER.count(orjson.dumps(response).decode())


@pytest.mark.parametrize("words", range(985, 1000))
def test_spent_tokens_is_exact_where_the_number_gains_a_digit_group(words: int) -> None:
    # Around 999 -> 1000 tokens the number's own cost goes from one token to two.
    response: dict[str, Any] = {"items": [{"digest": " a" * words}], "spent_tokens": 0}
    spent = finish(_COUNTER, response)
    assert spent == _COUNTER.count(orjson.dumps(response).decode())


def test_spent_tokens_is_exact_when_an_item_carries_the_same_key() -> None:
    response: dict[str, Any] = {"items": [{"spent_tokens": 12345}], "spent_tokens": 0}
    assert finish(_COUNTER, response) == _COUNTER.count(orjson.dumps(response).decode())


class _RecordingCounter:
    """cl100k counts, remembering every text it was asked to count."""

    def __init__(self) -> None:
        self._real = TiktokenCounter()
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return self._real.count(text)

    def cut(self, text: str, max_tokens: int) -> str:
        return self._real.cut(text, max_tokens)


@pytest.mark.parametrize("call", ["get_state", "list_keys"])
async def test_an_answers_items_are_counted_once_each_when_never_counted_before(
    redis_url: str, call: str
) -> None:
    # A fresh note's item was counted twice: once as the plan estimated it, once in the
    # finished answer, as two texts differing only in what follows the item. Fresh notes
    # are what a fleet mostly reads, and counting is most of such a read's CPU.
    counter = _RecordingCounter()
    board = Board(client=board_client(redis_url), counter=counter)
    try:
        uris = [f"bb://ws/t/n{i}" for i in range(10)]
        for i, uri in enumerate(uris):
            await board.update_state(
                UpdateState.parse(
                    {"uri": uri, "digest": f"Lag on node {i} is {i * 7} ms", "body": ""}
                ),
                author="a",
            )
        counter.texts.clear()
        if call == "get_state":
            answer = await board.get_state(GetState.parse({"uris": uris}))
        else:
            answer = await board.list_keys(ListKeys.parse({"topic": "t"}), workspace="ws")
        shown = [item["uri"] for item in answer["items"]]
        assert sorted(shown) == uris
        assert answer["spent_tokens"] == _COUNTER.count(orjson.dumps(answer).decode())
        for uri in shown[:-1]:
            texts = {t for t in counter.texts if t.startswith(uri + '"')}
            assert len(texts) == 1, (uri, texts)
    finally:
        await board.close()
