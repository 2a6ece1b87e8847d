"""spent_tokens is what the response really costs, in every listing mode."""

from __future__ import annotations

import orjson
import pytest

from blackboard_mcp.store import Board, ListKeys, TiktokenCounter, UpdateState


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
