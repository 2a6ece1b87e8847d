"""An import holds every record to what a tool write may store, so nothing it accepts can make
a later read, listing, search, export or page view fail.

Records are generated from a valid one with hostile values swapped in (times past year 9999,
addresses that are not addresses, a huge origin, columns on a text note, a table whose content
is not its columns' TSV, confidence outside [0, 1], a large body kept inline, past versions
beyond the history bound). Each file is checked as the CLI checks it; what passes is imported
into the real Redis and then read through the gateway in process in every way a client or
the page reads: none of it may answer ``internal``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from app_support import InProcessGateway, gateway_in_a_loop
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import admin_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import Board, ExportFile
from blackboard_mcp.store._errors import InvalidArgument, TooLarge

SOURCE = "src"
MAX_SAFE = 2**53 - 1


def base_record(path: str, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "uri": f"bb://{SOURCE}/t/{path}", "kind": "text", "version": 1, "digest": "a note",
        "content": "body text", "offloaded": False, "columns": None, "sources": [],
        "confidence": None, "author": "a", "origin": "", "size": 9, "est_tokens": 1,
        "digest_tokens": 1, "body_tokens": 1, "nrows": 0, "created": 1_700_000_000_000,
        "updated": 1_700_000_000_000, "links": [],
    }  # fmt: skip
    record.update(changes)
    return record


def table_record(path: str, **changes: Any) -> dict[str, Any]:
    table = {"kind": "table", "columns": ["a", "b"], "content": "a\tb\n1\t2", "nrows": 1}
    return base_record(path, **{**table, **changes})


HOSTILE: dict[str, st.SearchStrategy[Any]] = {
    "created": st.sampled_from([MAX_SAFE, 253402300800000, 10**15, 0]),
    "updated": st.sampled_from([MAX_SAFE, 253402300800000, 10**15, 0]),
    "sources": st.sampled_from(
        [["garbage"], [f"bb://{SOURCE}/t"], ["bb://other/t/x"], [f"bb://{SOURCE}/t/a@2"]]
    ),
    "origin": st.sampled_from(["x" * 300_000, "line\nbreak", "a\x00b", "ok origin"]),
    "columns": st.sampled_from([["c"] * 3, [f"c{i}" for i in range(50_000)], [""], ["a\tb"]]),
    "confidence": st.sampled_from([-5, 1e308, 1.5, float("nan"), 0.5]),
    "content": st.sampled_from(
        [
            "x" * 400_000,
            "a\x00b",
            "a\tb\n1",
            "a\tb\n1\t2\t3",
            "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
        ]
    ),
    "digest": st.sampled_from(["x" * 5000, " ", "d\x00igest", "fine"]),
    "author": st.sampled_from(["a\x00", "x" * 500, "ok"]),
    "links": st.sampled_from(
        [[{"rel": "cites", "to": "nowhere"}], [{"rel": "cites", "to": f"bb://{SOURCE}/t/b"}]]
    ),
    "kind": st.sampled_from(["table", "summary", "text"]),
}


@st.composite
def export_lines(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A header and a few records, some fields of some records hostile."""
    records: list[dict[str, Any]] = []
    for i, make in enumerate(
        draw(st.lists(st.sampled_from([base_record, table_record]), min_size=1, max_size=3))
    ):
        changed = draw(st.dictionaries(st.sampled_from(sorted(HOSTILE)), st.just(None), max_size=2))
        values = {name: draw(HOSTILE[name]) for name in changed}
        records.append(make(f"n{i}", **values))
    if draw(st.booleans()):
        # A note with more past versions than any history bound.
        note = base_record("many", version=1200)
        for v in range(1, 1200):
            records.append(
                base_record("many", uri=f"bb://{SOURCE}/t/many@{v}", version=v,
                            current_version=1200, current_digest="a note")
            )  # fmt: skip
        records.append(note)
    return [{"format": "blackboard-mcp-export", "version": 2, "workspace": SOURCE}, *records]


async def _no_internal(gateway: InProcessGateway, token: str, ws: str, board: Board) -> None:
    listed = await gateway.ok(token, "list_keys", topic="t", limit=100, budget_tokens=100_000)
    uris = [i["uri"] for i in listed["items"]]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_keys", {}),
        ("list_keys", {"topic": "t", "mode": "table", "fields": ["author", "nrows", "created"]}),
        ("search_keys", {"q": "note"}),
    ]
    for uri in uris:
        for mode in ("digest", "fields", "full", "table", "ref"):
            fields = ["sources", "links", "columns", "origin", "created", "rows"]
            calls.append(("get_state", {"uris": [uri], "mode": mode, "fields": fields}))
        calls.append(("list_keys", {"topic": uri}))
        calls.append(("get_state", {"uris": [f"{uri}@1"], "mode": "full"}))
    for tool, arguments in calls:
        is_error, body = await gateway.call(token, tool, **arguments)
        assert not is_error or body["error"]["code"] != "internal", (tool, arguments, body)
        # The page reads through its own endpoint.
        page = await gateway.http.post(
            "/board/api/call",
            json={"tool": tool, "arguments": arguments},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert page.status_code != 500, (tool, arguments, page.text)
    async for _record in board.export_notes(ws):
        pass


def test_nothing_an_import_accepts_breaks_a_later_read(
    redis_url: str, tmp_path: Path, issuer: TokenIssuer
) -> None:
    with gateway_in_a_loop(redis_url, tmp_path, rate_limit_per_minute=1_000_000) as (
        runner,
        gateway,
    ):
        board = Board.from_url(redis_url)
        imported = 0
        accepted = 0

        @settings(
            max_examples=50,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(lines=export_lines())
        def check(lines: list[dict[str, Any]]) -> None:
            nonlocal imported, accepted
            imported += 1
            target = f"imp{imported}"
            dump = tmp_path / f"dump{imported}.jsonl"
            dump.write_text("\n".join(json.dumps(v) for v in lines) + "\n")
            with ExportFile.open(str(dump), max_line_bytes=1 << 22) as export:
                try:
                    export.check(target)
                except (InvalidArgument, TooLarge) as exc:
                    # Refused: it names the line and field, and nothing is written.
                    assert "line" in exc.details, exc
                    assert not runner.run(board.workspace_exists(target))
                    return
                runner.run(
                    board.import_notes(export.records, workspace=target, replace=False, author="op")
                )
            accepted += 1
            runner.run(_no_internal(gateway, admin_token(issuer, target), target, board))

        try:
            check()
        finally:
            runner.run(board.close())
        # The property is about what is accepted: enough examples must have been.
        assert accepted >= 10, accepted


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"created": MAX_SAFE}, "created"),
        ({"updated": 253402300800000}, "updated"),
        ({"origin": "x" * 300_000}, "origin"),
        ({"columns": ["a"]}, "columns"),
        ({"confidence": -5}, "confidence"),
        ({"confidence": 1e308}, "confidence"),
        ({"sources": ["garbage"]}, "sources"),
    ],
)
def test_a_record_a_write_could_not_store_is_refused_naming_its_line_and_field(
    tmp_path: Path, changes: dict[str, Any], field: str
) -> None:
    dump = tmp_path / "dump.jsonl"
    lines = [
        {"format": "blackboard-mcp-export", "version": 2, "workspace": SOURCE},
        base_record("fine"),
        base_record("bad", **changes),
    ]
    dump.write_text("\n".join(json.dumps(v) for v in lines) + "\n")
    with (
        ExportFile.open(str(dump), max_line_bytes=1 << 22) as export,
        pytest.raises((InvalidArgument, TooLarge)) as refused,
    ):
        export.check("w")
    assert refused.value.details["line"] == 3
    assert refused.value.details["argument"] == field


@pytest.mark.parametrize(
    "content",
    ["a\tb\n1", "a\tb\n1\t2\t3", "x\ty\n1\t2", "a\tb\n1\t2\r"],
    ids=["short-row", "long-row", "other-header", "carriage-return"],
)
def test_table_content_that_is_not_its_columns_tsv_is_refused(tmp_path: Path, content: str) -> None:
    dump = tmp_path / "dump.jsonl"
    lines = [
        {"format": "blackboard-mcp-export", "version": 2, "workspace": SOURCE},
        table_record("bad", content=content),
    ]
    dump.write_text("\n".join(json.dumps(v) for v in lines) + "\n")
    with (
        ExportFile.open(str(dump), max_line_bytes=1 << 22) as export,
        pytest.raises(InvalidArgument) as refused,
    ):
        export.check("w")
    assert refused.value.details["argument"] == "content"


async def test_past_versions_beyond_the_bound_are_dropped_oldest_first_and_indexed_by_age(
    redis_url: str, tmp_path: Path
) -> None:
    import redis.asyncio as aioredis

    from blackboard_mcp.store import ImportLimits

    dump = tmp_path / "dump.jsonl"
    versions = [
        base_record(
            "many",
            uri=f"bb://{SOURCE}/t/many@{v}",
            version=v,
            current_version=61,
            current_digest="a note",
            updated=1_000_000 + v,
        )
        for v in range(1, 61)
    ]
    lines = [
        {"format": "blackboard-mcp-export", "version": 2, "workspace": SOURCE},
        *versions,
        base_record("many", version=61),
    ]
    dump.write_text("\n".join(json.dumps(v) for v in lines) + "\n")
    board = Board.from_url(redis_url)
    try:
        with ExportFile.open(
            str(dump), max_line_bytes=1 << 22, limits=ImportLimits(history_versions=50)
        ) as export:
            export.check("kept")
            assert export.dropped == 10
            report = await board.import_notes(
                export.records, workspace="kept", replace=False, author="op"
            )
        assert report.versions == 50
        client = aioredis.Redis.from_url(redis_url)
        try:
            kept = await client.zrange("bbhv:{kept}:t/many", 0, -1)
            assert [int(v) for v in kept] == list(range(11, 61))
            # Each kept version is in the age index, at its own write time.
            by_age = await client.zrange("bbhx:{kept}", 0, -1, withscores=True)
            assert [(m.decode(), int(s)) for m, s in by_age] == [
                (f"t/many@{v}", 1_000_000 + v) for v in range(11, 61)
            ]
        finally:
            await client.aclose()
    finally:
        await board.close()
