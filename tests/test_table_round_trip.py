"""A table note reads back in the shape update_state takes: ``columns`` and ``rows``.

Every read that shows a table's content (full, fields, a past version, a part) gives its
rows as lists of cells, so reading a version and writing it back restores it exactly; cells
come back as the text they were stored as (numbers, booleans and null as written in TSV).
A table too big for the budget is cut between rows, and its parts, followed through
``cut.rest``, join to exactly its rows, with or without a choice of columns. Through the
gateway in process, on the real Redis, in the note's hash and offloaded to a blob.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from app_support import InProcessGateway, gateway_in_a_loop, in_process_gateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import agent_token

from blackboard_mcp.auth import TokenIssuer


@pytest.fixture
async def gateway(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    async with in_process_gateway(redis_url, tmp_path, rate_limit_per_minute=1_000_000) as gw:
        yield gw


COLUMNS = ["team", "score", "note"]
WRITTEN_ROWS: list[list[Any]] = [["red", 3, "ok"], ["x\\ty", None, True], ["", 2.5, "naïve 😀"]]
READ_ROWS = [["red", "3", "ok"], ["x\\ty", "", "true"], ["", "2.5", "naïve 😀"]]


async def write_table(
    gateway: InProcessGateway, token: str, uri: str, rows: list[list[Any]], **extra: Any
) -> dict[str, Any]:
    return await gateway.ok(
        token, "update_state", uri=uri, digest="scores", columns=COLUMNS, rows=rows, **extra
    )


async def read_one(gateway: InProcessGateway, token: str, uri: str, **args: Any) -> dict[str, Any]:
    answer = await gateway.ok(token, "get_state", uris=[uri], **args)
    [item] = answer["items"]
    assert "error" not in item, item
    return dict(item)


async def test_a_full_read_gives_columns_and_rows_as_update_state_takes_them(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/research/scores"
    await write_table(gateway, token, uri, WRITTEN_ROWS)
    item = await read_one(gateway, token, uri, mode="full")
    assert item["columns"] == COLUMNS
    assert item["rows"] == READ_ROWS
    assert item["nrows"] == 3
    assert "table" not in item


async def test_the_restore_recipe_works_verbatim_for_a_table(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/research/replica-lag"
    await write_table(gateway, token, uri, WRITTEN_ROWS)
    await write_table(gateway, token, uri, [["blue", 9, "later"]], expect_version=1)
    old = await read_one(gateway, token, f"{uri}@1", mode="full")
    # The recipe: read the version, write it back with the current version expected.
    written = await gateway.ok(
        token,
        "update_state",
        uri=uri,
        digest=old["digest"],
        columns=old["columns"],
        rows=old["rows"],
        expect_version=old["current_version"],
    )
    assert written["version"] == 3
    now = await read_one(gateway, token, uri, mode="full")
    assert (now["columns"], now["rows"]) == (COLUMNS, READ_ROWS)
    # Restored exactly: the same stored content, so the same size.
    assert now["size"] == old["size"]


async def test_fields_and_table_modes_give_the_chosen_columns_with_their_rows(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/research/scores"
    await write_table(gateway, token, uri, WRITTEN_ROWS)
    both = await read_one(gateway, token, uri, mode="fields", fields=["columns", "rows"])
    assert both == {"uri": uri, "columns": COLUMNS, "rows": READ_ROWS}
    picked = await read_one(gateway, token, uri, mode="fields", fields=["note", "team"])
    assert picked == {
        "uri": uri,
        "columns": ["note", "team"],
        "rows": [["ok", "red"], ["true", "x\\ty"], ["naïve 😀", ""]],
    }
    table = await read_one(gateway, token, uri, mode="table", fields=["score"])
    assert (table["columns"], table["rows"]) == (["score"], [["3"], [""], ["2.5"]])
    whole = await read_one(gateway, token, uri, mode="table")
    assert (whole["columns"], whole["rows"]) == (COLUMNS, READ_ROWS)


async def test_a_listing_counts_a_tables_rows_as_nrows(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    await write_table(gateway, token, f"bb://{workspace}/research/scores", WRITTEN_ROWS)
    await gateway.ok(
        token, "update_state", uri=f"bb://{workspace}/research/prose", digest="d", body="text"
    )
    listed = await gateway.ok(
        token, "list_keys", topic="research", mode="table", fields=["nrows"], order="name"
    )
    assert listed["table"].split("\n")[1:] == [
        f"bb://{workspace}/research/prose\t",
        f"bb://{workspace}/research/scores\t3",
    ]
    digests = await gateway.ok(token, "list_keys", topic="research", fields=["nrows"], order="name")
    assert [i.get("nrows") for i in digests["items"]] == [None, 3]


async def test_a_table_with_no_rows_reads_back_empty(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/research/empty"
    await write_table(gateway, token, uri, [])
    item = await read_one(gateway, token, uri, mode="full")
    assert (item["columns"], item["rows"], item["nrows"]) == (COLUMNS, [], 0)


async def read_rows(
    gateway: InProcessGateway, token: str, uri: str, budget: int, **args: Any
) -> tuple[list[list[str]], list[str]]:
    """Follow ``cut.rest`` from ``uri`` to the end: the rows joined, and the rests read."""
    rows: list[list[str]] = []
    rests: list[str] = []
    address = uri
    for _ in range(2000):
        answer = await gateway.ok(token, "get_state", uris=[address], budget_tokens=budget, **args)
        assert answer["spent_tokens"] <= budget, answer
        if not answer["items"]:
            assert answer["need_budget"] > budget, answer
            budget = answer["need_budget"]
            continue
        [item] = answer["items"]
        assert "error" not in item, item
        assert all(isinstance(row, list) for row in item["rows"]), item
        rows += item["rows"]
        cut = item.get("cut")
        if cut is None:
            return rows, rests
        assert item["rows"], item
        rests.append(cut["rest"])
        address = cut["rest"]
    raise AssertionError("the rests never ended")


@pytest.mark.parametrize("count", [40, 3000], ids=["in-the-note", "offloaded"])
async def test_the_parts_of_a_table_join_to_exactly_its_rows(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, count: int
) -> None:
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/research/big"
    written = [[f"row {i} 龘😀", i, "é" * (i % 7)] for i in range(count)]
    await write_table(gateway, token, uri, written)
    expected = [[str(c) for c in row] for row in written]
    rows, rests = await read_rows(gateway, token, uri, budget=300, mode="full")
    assert len(rests) >= 2
    assert rows == expected
    # The same parts with two of the columns chosen: the rests are the stored table's.
    rows, _ = await read_rows(
        gateway, token, uri, budget=300, mode="fields", fields=["note", "team"]
    )
    assert rows == [[row[2], row[0]] for row in expected]


async def test_an_offset_inside_a_row_reads_from_the_next_row(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/research/scores"
    await write_table(gateway, token, uri, WRITTEN_ROWS)
    header = len("team\tscore\tnote\n")
    at_row = await read_one(gateway, token, f"{uri}@1#{header}", mode="full")
    assert at_row == {"uri": f"{uri}@1#{header}", "rows": READ_ROWS}
    inside = await read_one(gateway, token, f"{uri}@1#{header + 2}", mode="full")
    assert inside["rows"] == READ_ROWS[1:]
    inside_the_header = await read_one(gateway, token, f"{uri}@1#3", mode="full")
    assert inside_the_header["rows"] == READ_ROWS


_CELL_CHARACTERS = st.one_of(
    st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    st.characters(min_codepoint=0x0590, max_codepoint=0x06FF),
    st.characters(exclude_categories=["Cs"], exclude_characters="\t\n\r"),
)
_CELLS = st.one_of(
    st.text(_CELL_CHARACTERS, max_size=40),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.none(),
    st.booleans(),
)


def _as_read(cell: object) -> str:
    if cell is None:
        return ""
    if isinstance(cell, bool):
        return "true" if cell else "false"
    return str(cell)


def test_any_table_read_in_parts_joins_to_exactly_its_rows(
    redis_url: str, tmp_path: Path, issuer: TokenIssuer
) -> None:
    token = agent_token(issuer, "tables")
    with gateway_in_a_loop(
        redis_url, tmp_path, rate_limit_per_minute=1_000_000, offload_bytes=2048
    ) as (runner, gateway):
        written = 0

        @settings(
            max_examples=40,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(
            rows=st.lists(st.lists(_CELLS, min_size=3, max_size=3), min_size=1, max_size=120),
            budget=st.integers(min_value=150, max_value=600),
        )
        def check(rows: list[list[object]], budget: int) -> None:
            nonlocal written
            written += 1
            uri = f"bb://tables/t/n{written}"

            async def example() -> None:
                await write_table(gateway, token, uri, rows)
                joined, _ = await read_rows(gateway, token, uri, budget, mode="full")
                assert joined == [[_as_read(c) for c in row] for row in rows]

            runner.run(example())

        check()
