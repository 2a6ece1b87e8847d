"""A board stored in the earlier field layout reads, lists, searches, keeps its history and
takes writes after the upgrade, and what the notes hold afterwards is this layout alone.

The earlier layout stored the same values under their long names (``version``,
``digest_tokens``) and the note's address in ``uri``; these tests make it from notes written
now, which is exactly what that layout held (store/connection/_field_names.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis
from app_support import in_process_gateway
from store_support import raw
from support import agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.gateway import _app
from blackboard_mcp.store import (
    Board,
    GetState,
    LinkState,
    ListKeys,
    SearchKeys,
    Unavailable,
    UpdateState,
    board_client,
)
from blackboard_mcp.store.connection import _field_layout
from blackboard_mcp.store.connection import _key_names as keys
from blackboard_mcp.store.connection._field_layout import FieldLayout, convert_field_layout
from blackboard_mcp.store.connection._field_names import (
    FORMAT_VERSION,
    LONG_NAMES,
    STORED_NAMES,
)
from blackboard_mcp.store.connection._search_index import wait_until_indexed

WS = "lay"


def _to_earlier_layout(url: str) -> int:
    """Every note and kept version of the board as the earlier layout stored it; the board's
    mark of this layout and this version's indexes removed, as a board of that release had
    neither. Returns how many hashes were rewritten."""
    client = raw(url)
    try:
        client.execute_command("FT.DROPINDEX", keys.INDEX_NAME)
        client.execute_command("FT.DROPINDEX", keys.digest_index(keys.INDEX_NAME))
        client.delete(keys.field_layout())
        rewritten = 0
        for prefix in (keys.NOTE_PREFIX, keys.VERSION_PREFIX):
            for key in client.scan_iter(match=f"{prefix}*", count=1000):
                stored = client.hgetall(key)
                earlier = {LONG_NAMES[k.decode()]: v for k, v in stored.items()}
                if prefix == keys.NOTE_PREFIX:
                    member = key.decode().split("}:", 1)[1]
                    earlier["uri"] = f"bb://{WS}/{member}".encode()
                client.delete(key)
                client.hset(key, mapping=earlier)  # type: ignore[arg-type]
                rewritten += 1
        return rewritten
    finally:
        client.close()


def _field_names(url: str) -> set[str]:
    client = raw(url)
    try:
        names: set[str] = set()
        for prefix in (keys.NOTE_PREFIX, keys.VERSION_PREFIX):
            for key in client.scan_iter(match=f"{prefix}*", count=1000):
                names |= {k.decode() for k in client.hkeys(key)}
        return names
    finally:
        client.close()


async def _write_board(board: Board) -> None:
    def write(args: dict[str, Any]) -> UpdateState:
        return UpdateState.parse({"uri": f"bb://{WS}/{args.pop('path')}", **args})

    await board.update_state(
        write({"path": "plan/a", "digest": "The plan.", "body": "first draft"}), author="ann"
    )
    await board.update_state(
        write({"path": "plan/a", "digest": "The plan, revised.", "body": "second draft"}),
        author="bob",
    )
    await board.update_state(
        write(
            {
                "path": "notes/bird",
                "digest": "A bird note.",
                "body": "the hidden word is ptarmigan",
                "sources": [f"bb://{WS}/plan/a"],
                "confidence": 0.75,
            }
        ),
        author="ann",
    )
    # Text of many scripts and no spaces: the conversion moves bytes, never characters.
    await board.update_state(
        write({"path": "notes/ja", "digest": "日本語のメモ 🦜", "body": "東京大阪京都名古屋🦜🦜"}),
        author="作者",
    )
    # Offloaded past the board's inline size: its body lives in a blob the hash names.
    await board.update_state(
        write({"path": "notes/big", "digest": "A long log.", "body": "walrus line\n" * 2000}),
        author="ann",
    )
    await board.update_state(
        write(
            {
                "path": "data/t",
                "digest": "A table.",
                "columns": ["name", "count"],
                "rows": [["a", "1"], ["b", "2"]],
            }
        ),
        author="cy",
    )
    await board.link_state(
        LinkState.parse(
            {"src": f"bb://{WS}/notes/bird", "rel": "cites", "dst": f"bb://{WS}/plan/a"}
        ),
        author="ann",
    )


async def _answers(board: Board) -> list[Any]:
    paths = ("plan/a", "plan/a@1", "notes/bird", "notes/ja", "notes/big", "data/t")
    uris = [f"bb://{WS}/{p}" for p in paths]
    full = await board.get_state(
        GetState.parse({"uris": uris, "mode": "full", "budget_tokens": 50_000})
    )
    digests = await board.get_state(GetState.parse({"uris": uris, "mode": "digest"}))
    listed = await board.list_keys(ListKeys.parse({"limit": 50}), workspace=WS)
    by_version = await board.list_keys(ListKeys.parse({"order": "version"}), workspace=WS)
    exported = [record async for record in board.export_notes(WS)]
    return [full, digests, listed, by_version, exported]


async def _earlier_layout_board(redis_url: str) -> tuple[list[Any], int]:
    """The board of ``_write_board`` in the earlier layout: what it answered before it was
    rewritten, and how many hashes were rewritten."""
    board = Board(client=board_client(redis_url))
    await board.start()
    try:
        await _write_board(board)
        before = await _answers(board)
    finally:
        await board.close()
    return before, _to_earlier_layout(redis_url)


async def test_an_earlier_layout_board_answers_as_before_once_a_gateway_starts(
    redis_url: str,
) -> None:
    before, rewritten = await _earlier_layout_board(redis_url)
    assert rewritten == 6  # five notes and the plan's first version
    assert "version" in _field_names(redis_url) and "uri" in _field_names(redis_url)

    board = Board(client=board_client(redis_url))
    await board.start()
    try:
        assert _field_names(redis_url) <= set(STORED_NAMES.values())
        assert await _answers(board) == before
        assert await wait_until_indexed(board.redis.routed, timeout=10)
        found = await board.search_keys(SearchKeys.parse({"q": "ptarmigan"}), workspace=WS)
        assert [i["uri"] for i in found["items"]] == [f"bb://{WS}/notes/bird"]
        by_digest = await board.search_keys(SearchKeys.parse({"q": "revised"}), workspace=WS)
        assert [i["uri"] for i in by_digest["items"]] == [f"bb://{WS}/plan/a"]
        # Writes go on from the converted version, with its compare-and-swap.
        written = await board.update_state(
            UpdateState.parse(
                {
                    "uri": f"bb://{WS}/plan/a",
                    "digest": "The plan, third.",
                    "body": "third draft",
                    "expect_version": 2,
                }
            ),
            author="ann",
        )
        assert written["version"] == 3
        appended = await board.update_state(
            UpdateState.parse(
                {"uri": f"bb://{WS}/notes/big", "digest": "A longer log.", "append": "walrus end\n"}
            ),
            author="ann",
        )
        assert appended["version"] == 2
        [item] = (
            await board.get_state(
                GetState.parse(
                    {"uris": [f"bb://{WS}/notes/big"], "mode": "full", "budget_tokens": 50_000}
                )
            )
        )["items"]
        assert item["body"] == "walrus line\n" * 2000 + "walrus end\n"
    finally:
        await board.close()


async def test_the_conversion_leaves_a_board_of_this_layout_as_it_is_and_then_marks_it(
    redis_url: str, board: Board
) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        # An empty board's start wrote nothing, not even the mark.
        assert client.dbsize() == 0
        await _write_board(board)
        kept = {key: client.dump(key) for key in client.scan_iter(match="bb[nh]:*")}
        # Unmarked: every key is looked at, none is changed, and the board is marked.
        assert await convert_field_layout(board.redis.routed) == 0
        assert {key: client.dump(key) for key in client.scan_iter(match="bb[nh]:*")} == kept
        assert client.get(keys.field_layout()) == FORMAT_VERSION.encode()
        # Marked: nothing is looked at, so a hash in the earlier layout is left as it is.
        client.hset(f"{keys.NOTE_PREFIX}{{{WS}}}:t/by-hand", mapping={"version": 1})
        assert await convert_field_layout(board.redis.routed) == 0
        assert client.hkeys(f"{keys.NOTE_PREFIX}{{{WS}}}:t/by-hand") == [b"version"]
    finally:
        client.close()


async def test_a_note_hash_holds_each_field_under_its_short_name_and_no_address(
    redis_url: str, board: Board
) -> None:
    await _write_board(board)
    names = _field_names(redis_url)
    assert names <= set(STORED_NAMES.values())
    assert all(len(name) == 1 for name in names)
    assert not names & {*STORED_NAMES, "uri"}


async def test_a_start_that_failed_before_converting_is_tried_again_at_the_next_call(
    redis_url: str,
) -> None:
    before, _ = await _earlier_layout_board(redis_url)
    board = Board(client=board_client(redis_url))
    try:
        # As a start that Redis failed half way leaves it: converting required, not done.
        board.redis.layout.starting()
        with pytest.raises(Unavailable):
            await board.get_state(GetState.parse({"uris": [f"bb://{WS}/plan/a"]}))
        # That call started the conversion again; a caller that retries once it is done
        # reads what was there before.
        await board.redis.layout.ensure()
        assert not board.redis.layout.refuses_calls
        assert await _answers(board) == before
    finally:
        await board.close()


async def test_calls_are_refused_while_a_start_converts_and_answer_after(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = asyncio.Event()

    async def held(client: Any) -> int:
        await release.wait()
        return await convert_field_layout(client)

    monkeypatch.setattr(_field_layout, "convert_field_layout", held)
    board = Board(client=board_client(redis_url))
    try:
        layout = FieldLayout(board.redis.routed)
        layout.starting()
        converting = asyncio.create_task(layout.ensure())
        await asyncio.sleep(0)
        assert layout.converting and not layout.converted
        assert layout.refuses_calls
        with pytest.raises(Unavailable) as refused:
            layout.refuse()
        assert "/readyz" in refused.value.hint
        release.set()
        await converting
        assert not layout.refuses_calls and not layout.converting
    finally:
        await board.close()


async def test_a_gateway_serves_health_and_refuses_note_calls_until_its_start_converts(
    redis_url: str,
    tmp_path: Path,
    issuer: TokenIssuer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _earlier_layout_board(redis_url)
    entered, release, converted = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def held(client: Any) -> int:
        entered.set()
        await release.wait()
        try:
            return await convert_field_layout(client)
        finally:
            converted.set()

    monkeypatch.setattr(_field_layout, "convert_field_layout", held)
    # The start is still converting when the wait is over: the server serves anyway.
    monkeypatch.setattr(_app, "START_WAIT_SECONDS", 0.0)
    token = agent_token(issuer, WS)
    async with in_process_gateway(redis_url, tmp_path / "gw") as gateway:
        await entered.wait()
        assert (await gateway.http.get("/healthz")).status_code == 200
        assert (await gateway.http.get("/readyz")).status_code == 503
        is_error, body = await gateway.call(
            token, "get_state", uris=[f"bb://{WS}/plan/a"], mode="full"
        )
        assert is_error and body["error"]["code"] == "unavailable", body
        release.set()
        await converted.wait()
        read = await gateway.ok(token, "get_state", uris=[f"bb://{WS}/plan/a"], mode="full")
        assert read["items"][0]["body"] == "second draft"
        assert read["items"][0]["version"] == 2
