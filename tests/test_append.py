"""append: extends a text note in place, in one atomic step, without expect_version."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from app_support import InProcessGateway
from store_support import raw, snapshot, uri
from support import agent_token, call

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import Board, GetState, InvalidArgument, SearchKeys, TooLarge, UpdateState
from blackboard_mcp.store.connection._field_names import FIELD

ORIGIN = uri("origin", topic="src")
AUTHOR = "agent"


async def body_of(board: Board, address: str) -> tuple[str, int]:
    response = await board.get_state(
        GetState.parse({"uris": [address], "mode": "full", "budget_tokens": 100_000})
    )
    [item] = response["items"]
    assert "cut" not in item
    return item["body"], item["version"]


async def test_append_to_a_missing_note_creates_it(board: Board) -> None:
    result = await board.update_state(
        UpdateState.parse({"uri": uri("log"), "digest": "A log.", "append": "a\n"}), author=AUTHOR
    )
    assert result == {"version": 1, "digest": "A log.", "warnings": []}
    assert await body_of(board, uri("log")) == ("a\n", 1)
    [change] = await board.changes("ws")
    assert change["op"] == "append"


async def test_append_extends_the_body_and_bumps_the_version(board: Board) -> None:
    await board.update_state(
        UpdateState.parse(
            {"uri": uri("log"), "digest": "A log.", "body": "one\n", "expect_version": 0}
        ),
        author=AUTHOR,
    )
    first = await board.update_state(
        UpdateState.parse({"uri": uri("log"), "digest": "A log, two.", "append": "two\n"}),
        author=AUTHOR,
    )
    second = await board.update_state(
        UpdateState.parse({"uri": uri("log"), "digest": "A log, three.", "append": "three\n"}),
        author=AUTHOR,
    )
    assert (first["version"], second["version"]) == (2, 3)
    assert await body_of(board, uri("log")) == ("one\ntwo\nthree\n", 3)
    [item] = (await board.get_state(GetState.parse({"uris": [uri("log")]})))["items"]
    assert item["digest"] == "A log, three."


async def test_append_keeps_sources_and_confidence_it_does_not_replace(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": ORIGIN, "digest": "o", "body": "o"}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse(
            {
                "uri": uri("log"),
                "digest": "d",
                "body": "x",
                "sources": [ORIGIN],
                "confidence": 0.5,
                "expect_version": 0,
            }
        ),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("log"), "digest": "d", "append": "y"}), author=AUTHOR
    )
    [item] = (await board.get_state(GetState.parse({"uris": [uri("log")], "mode": "full"})))[
        "items"
    ]
    assert (item["body"], item["sources"], item["confidence"]) == ("xy", [ORIGIN], 0.5)


async def test_concurrent_appends_are_all_kept(board: Board) -> None:
    tasks = 50
    results = await asyncio.gather(
        *(
            board.update_state(
                UpdateState.parse({"uri": uri("log"), "digest": "A log.", "append": f"<{i}>"}),
                author=f"a{i}",
            )
            for i in range(tasks)
        )
    )
    assert sorted(r["version"] for r in results) == list(range(1, tasks + 1))
    body, version = await body_of(board, uri("log"))
    assert version == tasks
    for i in range(tasks):
        assert body.count(f"<{i}>") == 1
    assert len(body) == sum(len(f"<{i}>") for i in range(tasks))


async def test_append_to_a_table_note_is_refused(board: Board, redis_url: str) -> None:
    await board.update_state(
        UpdateState.parse(
            {
                "uri": uri("tab"),
                "digest": "A table.",
                "columns": ["a"],
                "rows": [["1"]],
                "expect_version": 0,
            }
        ),
        author=AUTHOR,
    )
    before = snapshot(redis_url)
    with pytest.raises(InvalidArgument) as info:
        await board.update_state(
            UpdateState.parse({"uri": uri("tab"), "digest": "d", "append": "2"}), author=AUTHOR
        )
    assert info.value.details["argument"] == "append"
    assert snapshot(redis_url) == before


async def test_append_with_expect_version_is_refused(board: Board, redis_url: str) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("log"), "digest": "d", "body": "a", "expect_version": 0}),
        author=AUTHOR,
    )
    before = snapshot(redis_url)
    with pytest.raises(InvalidArgument) as info:
        await board.update_state(
            UpdateState.parse(
                {"uri": uri("log"), "digest": "d", "append": "b", "expect_version": 1}
            ),
            author=AUTHOR,
        )
    assert info.value.details["argument"] == "expect_version"
    assert snapshot(redis_url) == before


async def test_empty_append_is_refused(board: Board) -> None:
    with pytest.raises(InvalidArgument) as info:
        await board.update_state(
            UpdateState.parse({"uri": uri("log"), "digest": "d", "append": ""}), author=AUTHOR
        )
    assert info.value.details["argument"] == "append"


async def test_append_crossing_the_offload_threshold_moves_the_body_to_a_blob(
    board: Board, redis_url: str
) -> None:
    chunk = "line \u00e9\u6771 " * 100 + "\n"  # multibyte, about 1.3 KB a chunk
    expected = ""
    client = raw(redis_url)
    try:
        for _ in range(12):
            await board.update_state(
                UpdateState.parse({"uri": uri("log"), "digest": "A log.", "append": chunk}),
                author=AUTHOR,
            )
            expected += chunk
            stored = client.hget("bbn:{ws}:t/log", FIELD.body).decode()
            blob = client.hget("bbn:{ws}:t/log", FIELD.blob).decode()
            if len(expected.encode()) > 10 * 1024:
                assert stored == ""
                assert client.get(f"bbb:{{ws}}:{blob}").decode() == expected
            else:
                assert stored == expected
                assert blob == ""
        assert len(client.keys("bbb:*")) == 1  # each longer blob replaced the previous one
    finally:
        client.close()
    body, version = await body_of(board, uri("log"))
    assert body == expected
    assert version == 12


async def test_sixty_four_agents_appending_to_one_note_through_a_gateway_are_all_kept(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    # The seed's running entry (a shared log): an append has no version to conflict on, so
    # none may be refused however many agents append at once.
    writers, each = 64, 12
    log = f"bb://{workspace}/runs/log"
    token = agent_token(issuer, workspace)
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }

    async def agent(n: int, http: httpx.AsyncClient) -> list[dict[str, Any]]:
        answers = []
        for i in range(each):
            request = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {
                    "name": "update_state",
                    "arguments": {"uri": log, "digest": "The run's log.", "append": f"<{n}.{i}>"},
                },
            }
            reply = await http.post(app_gateway.mcp_url, json=request, headers=headers)
            assert reply.status_code == 200, reply.text
            answers.append(reply.json()["result"])
        return answers

    results = await asyncio.gather(*(agent(n, app_gateway.http) for n in range(writers)))
    answers = [a for per_agent in results for a in per_agent]
    refused = [a["structuredContent"] for a in answers if a["isError"]]
    assert refused == []
    versions = sorted(a["structuredContent"]["version"] for a in answers)
    assert versions == list(range(1, writers * each + 1))
    async with app_gateway.mcp_client(token) as client:
        err, body = await call(client, "get_state", uris=[log], mode="full", budget_tokens=100_000)
    assert not err and "cut" not in body["items"][0], body
    text = body["items"][0]["body"]
    for n in range(writers):
        for i in range(each):
            assert text.count(f"<{n}.{i}>") == 1


async def test_an_append_to_a_note_near_the_size_limit_keeps_every_byte(
    board: Board, redis_url: str
) -> None:
    limit = 1024 * 1024  # BB_MAX_BODY_BYTES's default
    start = "\u00e9" * ((limit - 100) // 2)  # two bytes a character
    await board.update_state(
        UpdateState.parse({"uri": uri("big"), "digest": "Big.", "body": start}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("big"), "digest": "Big.", "append": "tail-1 "}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("big"), "digest": "Big.", "append": "tail-2"}), author=AUTHOR
    )
    # Larger than any read's budget: looked at in Redis, and read back by its last part.
    client = raw(redis_url)
    try:
        blob, size, version = client.hmget(
            "bbn:{ws}:t/big", [FIELD.blob, FIELD.size, FIELD.version]
        )
        assert blob is not None and blob.startswith(b"log-")
        assert client.get(b"bbb:{ws}:" + blob) == (start + "tail-1 tail-2").encode()
        size = int(size or 0)
        assert (size, int(version or 0)) == (len(start.encode()) + len("tail-1 tail-2"), 3)
    finally:
        client.close()
    # One more byte than is left: refused, nothing written.
    before = snapshot(redis_url)
    with pytest.raises(TooLarge):
        await board.update_state(
            UpdateState.parse(
                {"uri": uri("big"), "digest": "Big.", "append": "x" * (limit - size + 1)}
            ),
            author=AUTHOR,
        )
    assert snapshot(redis_url) == before


async def test_appending_to_a_note_that_shares_its_blob_leaves_the_other_note_whole(
    board_without_history: Board, redis_url: str
) -> None:
    shared = "same large body " * 2000  # 32 KB: offloaded, content-addressed
    for name in ("a", "b"):
        await board_without_history.update_state(
            UpdateState.parse({"uri": uri(name), "digest": "Twin.", "body": shared}), author=AUTHOR
        )
    client = raw(redis_url)
    try:
        [blob] = {client.hget(f"bbn:{{ws}}:t/{n}", FIELD.blob) for n in ("a", "b")}
        assert client.hget("bbr:{ws}", blob) == b"2"
        await board_without_history.update_state(
            UpdateState.parse({"uri": uri("a"), "digest": "Twin.", "append": " more"}),
            author=AUTHOR,
        )
        assert (await body_of(board_without_history, uri("a")))[0] == shared + " more"
        assert (await body_of(board_without_history, uri("b")))[0] == shared
        own = client.hget("bbn:{ws}:t/a", FIELD.blob)
        assert own is not None and own.startswith(b"log-") and own != blob
        assert client.hget("bbr:{ws}", blob) == b"1"
        # Rewritten whole, the note's log blob is freed; deleted, the shared one goes too.
        await board_without_history.update_state(
            UpdateState.parse({"uri": uri("a"), "digest": "Short.", "body": "short"}), author=AUTHOR
        )
        assert not client.exists(f"bbb:{{ws}}:{own.decode()}")
        await board_without_history.delete(author=AUTHOR, workspace="ws", uri=uri("b"))
        assert client.keys("bbb:*") == []
    finally:
        client.close()


async def test_an_appended_notes_token_count_is_within_a_few_tokens_of_the_exact_one(
    board: Board,
) -> None:
    lines = [
        f"step {i}: checked replica lag on node-{i % 7}, WAL at {i * 37} MB\n" for i in range(200)
    ]
    for line in lines:
        await board.update_state(
            UpdateState.parse({"uri": uri("run"), "digest": "A run.", "append": line}),
            author=AUTHOR,
        )
    appended = (await board.get_state(GetState.parse({"uris": [uri("run")], "mode": "digest"})))[
        "items"
    ][0]
    await board.update_state(
        UpdateState.parse({"uri": uri("whole"), "digest": "A run.", "body": "".join(lines)}),
        author=AUTHOR,
    )
    whole = (await board.get_state(GetState.parse({"uris": [uri("whole")], "mode": "digest"})))[
        "items"
    ][0]
    # Each seam may merge or split a token: at most one either way per append.
    assert abs(appended["est_tokens"] - whole["est_tokens"]) <= len(lines)
    assert appended["est_tokens"] >= whole["est_tokens"] * 0.9


async def test_text_appended_past_the_offload_size_is_found_by_search(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("log"), "digest": "A log.", "body": "x " * 6000}),
        author=AUTHOR,
    )
    await board.update_state(
        UpdateState.parse(
            {"uri": uri("log"), "digest": "A log.", "append": " ptarmigan \u6771\u4eac"}
        ),
        author=AUTHOR,
    )
    found = await board.search_keys(SearchKeys.parse({"q": "ptarmigan"}), workspace="ws")
    assert [hit["uri"] for hit in found["items"]] == [uri("log")]


async def test_a_logs_search_text_stops_at_its_limit_on_a_whole_character(
    board: Board, redis_url: str
) -> None:
    chunk = "\u6771\u4eac\u00e9 " * 400  # 3-, 3- and 2-byte characters: seams fall anywhere
    for _ in range(20):
        await board.update_state(
            UpdateState.parse({"uri": uri("log"), "digest": "A log.", "append": chunk}),
            author=AUTHOR,
        )
    client = raw(redis_url)
    try:
        stext = client.hget("bbn:{ws}:t/log", FIELD.stext) or b""
    finally:
        client.close()
    assert 16 * 1024 - 4 < len(stext) <= 16 * 1024
    assert (chunk * 20).encode().startswith(stext)
    stext.decode("utf-8")  # strict: no character cut in two
