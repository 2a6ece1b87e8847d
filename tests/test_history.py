"""Note history: every write keeps the version it replaces, readable as ``uri@N`` and listed
with ``list_keys(topic=<note address>)``, through the MCP client, the gateway app and Redis."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from app_support import InProcessGateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_support import sweep_as_the_sweeper
from support import agent_token, call

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import (
    MAX_HISTORY_VERSIONS,
    Board,
    BoardLimits,
    GetState,
    ListKeys,
    UpdateState,
    board_client,
    check_record,
    parse_address,
)

MODES = ["digest", "fields", "table", "full", "ref"]


async def _write(client: Any, uri: str, **arguments: Any) -> dict[str, Any]:
    err, body = await call(client, "update_state", uri=uri, **arguments)
    assert not err, body
    return body


async def _versions(client: Any, note: str, **arguments: Any) -> list[str]:
    """Every version address list_keys gives for ``note``, walking its pages."""
    seen: list[str] = []
    after = None
    for _ in range(100):
        args = {"topic": note, **arguments}
        if after:
            args["after"] = after
        err, page = await call(client, "list_keys", **args)
        assert not err, page
        seen += [item["uri"] for item in page["items"]]
        after = page.get("next")
        if not after:
            return seen
    raise AssertionError("the list of versions does not end")


async def test_a_past_version_reads_in_every_mode_and_names_the_current_one(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    note = f"bb://{workspace}/plans/q3"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        await _write(client, note, digest="First plan.", body="Ship A.", expect_version=0)
        await _write(
            client, note, digest="A table.", columns=["step"], rows=[["a"], ["b"]], expect_version=1
        )
        await _write(client, note, digest="Third.", body="Ship C.", expect_version=2)
        for mode in MODES:
            args: dict[str, Any] = {"uris": [f"{note}@1", f"{note}@2", f"{note}@3"], "mode": mode}
            if mode == "fields":
                args["fields"] = ["author", "digest"]
            err, body = await call(client, "get_state", **args)
            assert not err, body
            one, two, three = body["items"]
            assert [one["uri"], two["uri"], three["uri"]] == [f"{note}@1", f"{note}@2", f"{note}@3"]
            assert one["current_version"] == two["current_version"] == 3, mode
            assert "current_version" not in three
            if mode != "fields":
                assert [one["version"], two["version"], three["version"]] == [1, 2, 3]
            if mode in ("digest", "ref", "full"):
                assert one["digest"] == "First plan." and two["digest"] == "A table."
            if mode == "full":
                assert one["body"] == "Ship A." and three["body"] == "Ship C."
                assert two["rows"] == [["a"], ["b"]]
            if mode == "table":
                assert two["rows"] == [["a"], ["b"]]
            assert any(f"{note}@1 is a past version" in w for w in body["warnings"])
        err, body = await call(client, "get_state", uris=[f"{note}@9"])
        # Says what to do: the note as it is now is one address away.
        assert not err and body["items"] == [
            {
                "uri": f"{note}@9",
                "error": "not_found",
                "hint": f"no version 9 of this note is kept; read {note} as it is now",
            }
        ]


async def test_a_note_lists_its_versions_newest_first_in_pages_within_the_budget(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    note = f"bb://{workspace}/log/run"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        for i in range(7):
            await _write(client, note, digest=f"Step {i}.", body=f"step {i}", expect_version=i)
        assert await _versions(client, note, limit=3) == [f"{note}@{v}" for v in range(7, 0, -1)]
        err, page = await call(
            client, "list_keys", topic=note, mode="table", fields=["version", "author", "size"]
        )
        assert not err
        lines = page["table"].splitlines()
        assert lines[0] == "uri\tversion\tauthor\tsize"
        assert lines[1] == f"{note}@7\t7\tagent-1\t6"
        err, page = await call(client, "list_keys", topic=note, budget_tokens=150)
        assert not err and page["spent_tokens"] <= 150 and page["truncated"]
        assert page["items"][0]["uri"] == f"{note}@7" and "next" in page


async def test_history_pages_under_concurrent_writers_skip_and_repeat_no_version(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    note = f"bb://{workspace}/hot/log"
    token = agent_token(issuer, workspace)
    async with app_gateway.mcp_client(token) as client:
        await _write(client, note, digest="Start.", body="0")

        async def writer(n: int) -> None:
            async with app_gateway.mcp_client(token) as mine:
                for i in range(10):
                    await _write(mine, note, digest=f"W{n}.", append=f" {n}.{i}")

        writing = asyncio.gather(*(writer(n) for n in range(4)))
        walks = []
        while not writing.done():
            walks.append(await _versions(client, note, limit=4))
        await writing
        walks.append(await _versions(client, note, limit=4))
    for seen in walks:
        numbers = [parse_address(u).version for u in seen]
        assert len(numbers) == len(set(numbers)), numbers  # none repeated
        # None skipped: the walk holds every version from its first down to 1.
        assert numbers == list(range(numbers[0], 0, -1)), numbers
    assert walks[-1][0] == f"{note}@41"


async def test_restore_races_another_writer_and_exactly_one_wins(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    note = f"bb://{workspace}/plans/race"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        await _write(client, note, digest="Good.", body="the good plan", expect_version=0)
        await _write(client, note, digest="Bad.", body="a bad plan", expect_version=1)
        err, old = await call(client, "get_state", uris=[f"{note}@1"], mode="full")
        assert not err
        past = old["items"][0]
        restore = call(
            client,
            "update_state",
            uri=note,
            digest=past["digest"],
            body=past["body"],
            expect_version=past["current_version"],
        )
        other = call(client, "update_state", uri=note, digest="Other.", body="x", expect_version=2)
        (err_a, a), (err_b, b) = await asyncio.gather(restore, other)
        assert sorted([err_a, err_b]) == [False, True], (a, b)
        loser = a if err_a else b
        assert loser["error"]["code"] == "conflict"
        err, now = await call(client, "get_state", uris=[note], mode="full")
        assert now["items"][0]["version"] == 3
        assert now["items"][0]["body"] in ("the good plan", "x")
        assert await _versions(client, note) == [f"{note}@{v}" for v in (3, 2, 1)]


async def test_a_version_is_read_only_with_the_topic_read_and_never_written_to(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    note = f"bb://{workspace}/secret/plan"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        await _write(client, note, digest="One.", body="one", expect_version=0)
        await _write(client, note, digest="Two.", body="two", expect_version=1)
        err, body = await call(client, "update_state", uri=f"{note}@1", digest="x", body="y")
        assert err and body["error"]["code"] == "invalid_argument"
        assert f"takes the note's address, {note}" in body["error"]["message"]
        err, body = await call(client, "link_state", src=note, rel="cites", dst=[f"{note}@1"])
        assert err and body["error"]["code"] == "invalid_argument"
    other_reader = agent_token(issuer, workspace, sub="reader", read=["public"], write=[])
    write_only = agent_token(issuer, workspace, sub="writer", read=[], write=["secret"])
    for token in (other_reader, write_only):
        async with app_gateway.mcp_client(token) as client:
            err, body = await call(client, "get_state", uris=[f"{note}@1"])
            if token is write_only:
                # No board_read at all: refused whole, before the handler.
                assert err and body["error"]["code"] == "forbidden", body
            else:
                assert body["items"] == [{"uri": f"{note}@1", "error": "forbidden"}], body
            err, body = await call(client, "list_keys", topic=note)
            assert err and body["error"]["code"] == "forbidden", body
            assert "One." not in json.dumps(body)


async def test_a_past_version_reads_as_a_resource(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    note = f"bb://{workspace}/facts/res"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        await _write(client, note, digest="Old.", body="old text", expect_version=0)
        await _write(client, note, digest="New.", body="new text", expect_version=1)
        old = (await client.read_resource(f"{note}@1")).contents[0]
        new = (await client.read_resource(note)).contents[0]
        assert getattr(old, "text", None) == "old text" and getattr(new, "text", None) == "new text"


async def test_a_log_built_by_appends_keeps_one_blob_not_a_copy_per_append(
    redis_url: str,
) -> None:
    board = Board(client=board_client(redis_url), limits=BoardLimits(history_versions=1000))
    note = "bb://applog/t/log"
    line = "x" * 99 + "\n"
    try:
        for _ in range(400):
            await board.update_state(
                UpdateState.parse({"uri": note, "digest": "A log.", "append": line}), author="a"
            )
        raw = redis.Redis.from_url(redis_url)
        try:
            blobs = raw.keys("bbb:{applog}:*")
            kept = raw.zcard("bbhv:{applog}:t/log")
            kept_bytes = sum(raw.memory_usage(k) or 0 for k in raw.keys("bbh:{applog}:*"))
        finally:
            raw.close()
        assert kept == 399 and len(blobs) == 1
        # The inline versions (up to the offload size) hold their text; past it, each kept
        # version is a few fields naming the one blob: far below 399 copies of ~20 KB.
        assert kept_bytes < 399 * 40 * 1024 / 10, kept_bytes
        past = await board.get_state(
            GetState.parse({"uris": [f"{note}@300"], "mode": "full", "budget_tokens": 100_000})
        )
        assert past["items"][0]["body"] == line * 300
        early = await board.get_state(GetState.parse({"uris": [f"{note}@2"], "mode": "full"}))
        assert early["items"][0]["body"] == line * 2
    finally:
        await board.close()


async def test_the_bounds_drop_the_oldest_versions_and_never_the_current(redis_url: str) -> None:
    board = Board(client=board_client(redis_url), limits=BoardLimits(history_versions=3))
    note = "bb://bounded/t/n"
    big = "large body " * 2000  # offloaded: its blob must go with the last version naming it
    try:
        for i in range(6):
            body = big if i == 1 else f"v{i + 1}"
            await board.update_state(
                UpdateState.parse({"uri": note, "digest": f"V{i + 1}.", "body": body}), author="a"
            )
        page = await board.list_keys(ListKeys.parse({"topic": note}), workspace="bounded")
        assert [i["uri"] for i in page["items"]] == [f"{note}@{v}" for v in (6, 5, 4, 3)]
        gone = await board.get_state(GetState.parse({"uris": [f"{note}@2"]}))
        assert [(i["uri"], i["error"]) for i in gone["items"]] == [(f"{note}@2", "not_found")]
        raw = redis.Redis.from_url(redis_url)
        try:
            assert raw.keys("bbb:{bounded}:*") == []
            assert raw.hgetall("bbr:{bounded}") == {}
        finally:
            raw.close()
    finally:
        await board.close()


async def test_deleting_a_note_deletes_its_history(board: Board, redis_url: str) -> None:
    note = "bb://ws/gone/n"
    for i in range(3):
        await board.update_state(
            UpdateState.parse({"uri": note, "digest": "D.", "body": "b" * (20_000 * i + 1)}),
            author="a",
        )
    await board.delete(author="a", workspace="ws", uri=note)
    raw = redis.Redis.from_url(redis_url)
    try:
        assert raw.keys("bbh*:{ws}:gone/*") == [] and raw.keys("bbb:{ws}:*") == []
    finally:
        raw.close()
    await board.update_state(
        UpdateState.parse({"uri": note, "digest": "Again.", "body": "new"}), author="a"
    )
    page = await board.list_keys(ListKeys.parse({"topic": note}), workspace="ws")
    assert [i["uri"] for i in page["items"]] == [f"{note}@1"]


def test_the_cli_restores_a_version_under_the_operators_name_and_audits_it(
    redis_url: str, tmp_path: Path
) -> None:
    note = "bb://restored/t/n"

    async def write_two() -> None:
        board = Board(client=board_client(redis_url))
        try:
            for body in ("keep this", "not this"):
                await board.update_state(
                    UpdateState.parse({"uri": note, "digest": body.title() + ".", "body": body}),
                    author="agent",
                )
        finally:
            await board.close()

    asyncio.run(write_two())
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_")}
    env.update(BB_REDIS_URL=redis_url, HOME=str(tmp_path))
    run = [sys.executable, "-m", "blackboard_mcp.cli"]
    result = subprocess.run(
        [*run, "restore", f"{note}@1"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert f"restored {note}@1 as version 3 of {note}" in result.stdout

    async def read() -> dict[str, Any]:
        board = Board(client=board_client(redis_url))
        try:
            return await board.get_state(GetState.parse({"uris": [note], "mode": "full"}))
        finally:
            await board.close()

    item = asyncio.run(read())["items"][0]
    assert (item["version"], item["body"], item["digest"]) == (3, "keep this", "Keep This.")
    assert item["author"].startswith("cli:")
    tail = subprocess.run(
        [*run, "audit", "tail", "--workspace", "restored"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "cli.restore" in tail.stdout and f"{note}@1" in tail.stdout, tail.stdout
    again = subprocess.run(
        [*run, "restore", f"{note}@3"], env=env, capture_output=True, text=True, timeout=60
    )
    assert again.returncode != 0 and "nothing to restore" in again.stderr
    assert "Traceback" not in again.stderr


# A model of one note's history: the writes made, and what a bound of KEEP past versions
# leaves readable. Each step is a whole write or an append.
KEEP = 4
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("body"), st.text(alphabet="ab \n", min_size=1, max_size=30)),
        st.tuples(st.just("append"), st.text(alphabet="cd \n", min_size=1, max_size=30)),
        st.tuples(st.just("big"), st.sampled_from(["e", "f"])),
    ),
    min_size=1,
    max_size=12,
)


@given(steps=_STEPS)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_kept_version_reads_back_as_it_was_written(redis_url: str, steps: list) -> None:
    async def check() -> None:
        board = Board(
            client=board_client(redis_url),
            limits=BoardLimits(history_versions=KEEP, offload_bytes=64),
        )
        note = f"bb://model/t/n{abs(hash(tuple(steps))) % 10**9}"
        contents: list[str] = []
        try:
            for kind, text in steps:
                if kind == "append":
                    args: dict[str, Any] = {"append": text}
                    contents.append((contents[-1] if contents else "") + text)
                else:
                    body = text * 100 if kind == "big" else text
                    args = {"body": body}
                    contents.append(body)
                await board.update_state(
                    UpdateState.parse({"uri": note, "digest": f"V{len(contents)}.", **args}),
                    author="m",
                )
            current = len(contents)
            uris = [f"{note}@{v}" for v in range(1, current + 1)]
            read = await board.get_state(
                GetState.parse({"uris": uris, "mode": "full", "budget_tokens": 100_000})
            )
            for version, item in enumerate(read["items"], start=1):
                if version < current - KEEP:
                    assert item.get("error") == "not_found", (version, item)
                else:
                    assert item["body"] == contents[version - 1], (version, steps)
            await board.delete(author="m", workspace="model", uri=note)
        finally:
            await board.close()

    asyncio.run(check())
    # Deleted, the note leaves no kept version, no blob and no reference behind.
    raw = redis.Redis.from_url(redis_url)
    try:
        left = raw.keys("bbh*:{model}:*") + raw.keys("bbb:{model}:*")
        assert left == [] and not raw.hgetall("bbr:{model}"), left
    finally:
        raw.close()


@pytest.mark.parametrize(
    "value", ["bb://ws/t/k@0", "bb://ws/t/k@", "bb://ws/t/k@x", "bb://ws/t@1/k"]
)
def test_a_malformed_version_is_refused_naming_the_form(value: str) -> None:
    with pytest.raises(Exception) as info:
        parse_address(value)
    assert getattr(info.value, "code", "") == "invalid_argument"


async def test_an_export_with_history_imports_elsewhere_and_exports_again_the_same(
    board: Board,
) -> None:
    source, target = "hsrc", "hdst"
    big = "offloaded text " * 1500
    writes = [
        ("t/plain", {"body": "one"}),
        ("t/plain", {"body": "two"}),
        ("t/plain", {"columns": ["a", "b"], "rows": [["1", "2"]]}),
        ("t/big", {"body": big}),
        ("t/big", {"body": "small now"}),
        ("t/big", {"body": big + "and more"}),
        ("t/log", {"append": "first"}),
        ("t/log", {"append": " second"}),
        ("t/log", {"append": " third"}),
    ]
    for i, (name, content) in enumerate(writes):
        await board.update_state(
            UpdateState.parse({"uri": f"bb://{source}/{name}", "digest": f"Write {i}.", **content}),
            author="writer",
        )
    exported = [record async for record in board.export_notes(source)]
    assert sum("current_version" in r for r in exported) == 6  # 2 + 2 + 2 past versions
    records = [check_record(r, source=source, target=target) for r in exported]
    report = await board.import_notes(
        lambda: iter(records), workspace=target, replace=False, author="importer"
    )
    assert (report.imported, report.versions) == (3, 6)
    again = [record async for record in board.export_notes(target)]
    moved = orjson.loads(orjson.dumps(exported).replace(b"bb://hsrc/", b"bb://hdst/"))
    assert again == moved
    # Importing the same file again adds nothing: every note and version is there already.
    report = await board.import_notes(
        lambda: iter(records), workspace=target, replace=False, author="importer"
    )
    assert (report.imported, report.resumed, report.versions) == (0, 3, 0)


async def _kept(board: Board, note: str, workspace: str) -> list[int]:
    page = await board.list_keys(ListKeys.parse({"topic": note, "limit": 200}), workspace=workspace)
    return [item["version"] for item in page["items"]]


async def test_a_topics_history_bounds_override_its_workspaces_and_the_boards(
    board: Board,
) -> None:
    ws = "bounds"
    await board.update_state(
        UpdateState.parse({"uri": f"bb://{ws}/logs/n", "digest": "D.", "body": "0"}), author="a"
    )
    await board.set_history_bounds(workspace=ws, versions=3, max_age_seconds=None)
    policy = await board.set_history_bounds(
        workspace=ws, topic="scratch", versions=0, max_age_seconds=None
    )
    assert policy.versions == {"*": 3, "scratch": 0}
    for topic in ("logs", "scratch", "plans"):
        for i in range(1, 7):
            await board.update_state(
                UpdateState.parse({"uri": f"bb://{ws}/{topic}/n", "digest": "D.", "body": str(i)}),
                author="a",
            )
    assert await _kept(board, f"bb://{ws}/logs/n", ws) == [7, 6, 5, 4]
    assert await _kept(board, f"bb://{ws}/scratch/n", ws) == [6]
    assert await _kept(board, f"bb://{ws}/plans/n", ws) == [6, 5, 4, 3]
    # Cleared, the board's bound (50) applies again from the next write.
    await board.set_history_bounds(workspace=ws, versions=None, max_age_seconds=None)
    await board.update_state(
        UpdateState.parse({"uri": f"bb://{ws}/plans/n", "digest": "D.", "body": "7"}), author="a"
    )
    assert await _kept(board, f"bb://{ws}/plans/n", ws) == [7, 6, 5, 4, 3]


async def test_the_retention_sweep_expires_old_versions_by_their_topics_age_never_the_current(
    board: Board, redis_url: str
) -> None:
    ws = "aging"
    for topic in ("short", "long"):
        for i in range(3):
            await board.update_state(
                UpdateState.parse({"uri": f"bb://{ws}/{topic}/n", "digest": "D.", "body": str(i)}),
                author="a",
            )
    await board.set_history_bounds(workspace=ws, versions=None, max_age_seconds=3600)
    await board.set_history_bounds(workspace=ws, topic="long", versions=None, max_age_seconds=0)
    raw = redis.Redis.from_url(redis_url)
    try:
        seconds, micros = raw.time()
    finally:
        raw.close()
    now_ms = seconds * 1000 + micros // 1000
    # An hour and a bit later by the sweep's clock: the workspace's age has passed.
    swept = await sweep_as_the_sweeper(board, redis_url, owner="t", now_ms=now_ms + 3_700_000)
    assert swept == []  # no note is past a note age: only versions went
    assert await _kept(board, f"bb://{ws}/short/n", ws) == [3]
    assert await _kept(board, f"bb://{ws}/long/n", ws) == [3, 2, 1]  # 0: no age bound
    raw = redis.Redis.from_url(redis_url)
    try:
        assert raw.zrange("bbhx:{aging}", 0, -1) == [b"long/n@1", b"long/n@2"]
    finally:
        raw.close()


def test_the_cli_sets_history_bounds_for_a_topic_and_shows_them(
    redis_url: str, tmp_path: Path
) -> None:
    async def write() -> None:
        board = Board(client=board_client(redis_url))
        try:
            await board.update_state(
                UpdateState.parse({"uri": "bb://clihist/t/n", "digest": "D.", "body": "x"}),
                author="a",
            )
        finally:
            await board.close()

    asyncio.run(write())
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_")}
    env.update(BB_REDIS_URL=redis_url, HOME=str(tmp_path))
    base = [sys.executable, "-m", "blackboard_mcp.cli", "retention"]
    result = subprocess.run(
        [*base, "history", "--workspace", "clihist", "--topic", "t", "--versions", "5",
         "--max-age", "7d"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "history of topic t: 5 past versions, each kept 7d" in result.stdout
    bad = subprocess.run(
        [*base, "history", "--workspace", "clihist", "--versions", "lots", "--max-age", "1d"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "0 to 1000" in bad.stderr and "Traceback" not in bad.stderr


def test_the_settings_bound_on_kept_versions_is_the_stores() -> None:
    from blackboard_mcp.settings import Settings

    field = Settings.model_fields["history_versions"]
    assert [getattr(m, "le", None) for m in field.metadata if hasattr(m, "le")] == [
        MAX_HISTORY_VERSIONS
    ]


async def test_lowering_the_bound_drops_a_hundred_versions_a_write_not_all_at_once(
    redis_url: str,
) -> None:
    note = "bb://lowered/t/n"
    many = Board(client=board_client(redis_url), limits=BoardLimits(history_versions=300))
    few = Board(client=board_client(redis_url), limits=BoardLimits(history_versions=2))
    try:
        for i in range(251):
            await many.update_state(
                UpdateState.parse({"uri": note, "digest": "D.", "body": str(i)}), author="a"
            )
        kept = []
        for i in range(3):
            await few.update_state(
                UpdateState.parse({"uri": note, "digest": "D.", "body": f"x{i}"}), author="a"
            )
            raw = redis.Redis.from_url(redis_url)
            try:
                kept.append(raw.zcard("bbhv:{lowered}:t/n"))
            finally:
                raw.close()
        assert kept == [151, 52, 2]  # 250 kept; a write keeps one and drops at most 100
    finally:
        await many.close()
        await few.close()


@pytest.mark.parametrize(
    "bounds",
    [
        {"history_versions": MAX_HISTORY_VERSIONS + 1},
        {"history_versions": -1},
        {"history_max_age_seconds": -1},
    ],
)
def test_board_limits_built_directly_are_held_to_the_history_bounds(
    bounds: dict[str, int],
) -> None:
    # The settings and the retention overrides check these; a Board built in code (a bench,
    # an embedding program) must not get past them either.
    with pytest.raises(ValueError, match="history"):
        BoardLimits(**bounds)
    assert BoardLimits(history_versions=MAX_HISTORY_VERSIONS).history_versions == 1000
