"""Bodies over 10 KB live in content-addressed blobs: shared, ref-counted, still searchable."""

from __future__ import annotations

import hashlib

from store_support import raw, uri

from blackboard_mcp.store import Board, GetState, SearchKeys, UpdateState
from blackboard_mcp.store.connection._field_names import LONG_NAMES

AUTHOR = "agent"
# Multibyte on purpose: the threshold is in bytes, and a blob must round-trip every one.
LARGE = "Gr\u00fc\u00dfe \u6771\u4eac \U0001f600 zebra-crossing\n" * 400 + "the end"
OTHER_LARGE = "another large body \u00e9\n" * 800


def note_hash(redis_url: str, member: str) -> dict[str, str]:
    client = raw(redis_url)
    try:
        stored = client.hgetall(f"bbn:{{ws}}:{member}")
        return {LONG_NAMES[k.decode()]: v.decode() for k, v in stored.items()}
    finally:
        client.close()


def blob_keys(redis_url: str) -> set[str]:
    client = raw(redis_url)
    try:
        return {k.decode() for k in client.keys("bbb:*")}
    finally:
        client.close()


def refcounts(redis_url: str) -> dict[str, int]:
    client = raw(redis_url)
    try:
        return {k.decode(): int(v) for k, v in client.hgetall("bbr:{ws}").items()}
    finally:
        client.close()


async def full_body(board: Board, address: str) -> str:
    response = await board.get_state(
        GetState.parse({"uris": [address], "mode": "full", "budget_tokens": 100_000})
    )
    [item] = response["items"]
    assert "cut" not in item
    return str(item["body"])


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def test_large_body_is_stored_outside_the_note(board: Board, redis_url: str) -> None:
    assert len(LARGE.encode()) > 10 * 1024
    await board.update_state(
        UpdateState.parse(
            {"uri": uri("big"), "digest": "Big.", "body": LARGE, "expect_version": 0}
        ),
        author=AUTHOR,
    )
    stored = note_hash(redis_url, "t/big")
    assert stored["body"] == ""
    assert stored["blob"] == sha(LARGE)
    assert stored["size"] == str(len(LARGE.encode()))
    assert blob_keys(redis_url) == {f"bbb:{{ws}}:{sha(LARGE)}"}
    assert refcounts(redis_url) == {sha(LARGE): 1}


async def test_body_at_the_threshold_stays_inline(board: Board, redis_url: str) -> None:
    exactly = "x" * (10 * 1024)
    await board.update_state(
        UpdateState.parse({"uri": uri("edge"), "digest": "d", "body": exactly}), author=AUTHOR
    )
    assert note_hash(redis_url, "t/edge")["body"] == exactly
    assert blob_keys(redis_url) == set()
    await board.update_state(
        UpdateState.parse({"uri": uri("edge"), "digest": "d", "body": exactly + "y"}), author=AUTHOR
    )
    assert note_hash(redis_url, "t/edge")["body"] == ""
    assert len(blob_keys(redis_url)) == 1


async def test_full_read_returns_an_offloaded_body_byte_for_byte(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("big"), "digest": "Big.", "body": LARGE}), author=AUTHOR
    )
    body = await full_body(board, uri("big"))
    assert body.encode() == LARGE.encode()


async def test_digest_read_of_an_offloaded_note_does_not_carry_the_body(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("big"), "digest": "Big.", "body": LARGE}), author=AUTHOR
    )
    [item] = (await board.get_state(GetState.parse({"uris": [uri("big")]})))["items"]
    assert "body" not in item
    assert item["est_tokens"] == board.counter.count("Big.") + board.counter.count(LARGE)


async def test_two_notes_with_the_same_large_body_share_one_blob(
    board: Board, redis_url: str
) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A.", "body": LARGE}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("b"), "digest": "B.", "body": LARGE}), author=AUTHOR
    )
    assert blob_keys(redis_url) == {f"bbb:{{ws}}:{sha(LARGE)}"}
    assert refcounts(redis_url) == {sha(LARGE): 2}
    assert await full_body(board, uri("a")) == LARGE
    assert await full_body(board, uri("b")) == LARGE


async def test_blob_is_kept_while_another_note_uses_it_and_freed_after(
    board_without_history: Board, redis_url: str
) -> None:
    await board_without_history.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A.", "body": LARGE}), author=AUTHOR
    )
    await board_without_history.update_state(
        UpdateState.parse({"uri": uri("b"), "digest": "B.", "body": LARGE}), author=AUTHOR
    )

    await board_without_history.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A small.", "body": "small"}), author=AUTHOR
    )
    assert blob_keys(redis_url) == {f"bbb:{{ws}}:{sha(LARGE)}"}
    assert refcounts(redis_url) == {sha(LARGE): 1}
    assert await full_body(board_without_history, uri("a")) == "small"
    assert await full_body(board_without_history, uri("b")) == LARGE

    await board_without_history.update_state(
        UpdateState.parse({"uri": uri("b"), "digest": "B small.", "body": "tiny"}), author=AUTHOR
    )
    assert blob_keys(redis_url) == set()
    assert refcounts(redis_url) == {}
    assert note_hash(redis_url, "t/b")["blob"] == ""
    assert await full_body(board_without_history, uri("b")) == "tiny"


async def test_replacing_one_large_body_with_another_frees_the_old_blob(
    board_without_history: Board, redis_url: str
) -> None:
    await board_without_history.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A.", "body": LARGE}), author=AUTHOR
    )
    await board_without_history.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A.", "body": OTHER_LARGE}), author=AUTHOR
    )
    assert blob_keys(redis_url) == {f"bbb:{{ws}}:{sha(OTHER_LARGE)}"}
    assert refcounts(redis_url) == {sha(OTHER_LARGE): 1}
    assert await full_body(board_without_history, uri("a")) == OTHER_LARGE


async def test_rewriting_the_same_large_body_keeps_one_reference(
    board_without_history: Board, redis_url: str
) -> None:
    for _ in range(3):
        await board_without_history.update_state(
            UpdateState.parse({"uri": uri("a"), "digest": "A.", "body": LARGE}), author=AUTHOR
        )
    assert refcounts(redis_url) == {sha(LARGE): 1}
    await board_without_history.update_state(
        UpdateState.parse({"uri": uri("a"), "digest": "A.", "body": "small"}), author=AUTHOR
    )
    assert blob_keys(redis_url) == set()


async def test_offloaded_body_is_found_by_search(board: Board) -> None:
    await board.update_state(
        UpdateState.parse({"uri": uri("big"), "digest": "Greetings.", "body": LARGE}), author=AUTHOR
    )
    await board.update_state(
        UpdateState.parse({"uri": uri("small"), "digest": "Other.", "body": "nothing"}),
        author=AUTHOR,
    )
    result = await board.search_keys(SearchKeys.parse({"q": "zebra"}), workspace="ws")
    assert [i["uri"] for i in result["items"]] == [uri("big")]
    result = await board.search_keys(SearchKeys.parse({"q": "\u6771\u4eac"}), workspace="ws")
    assert [i["uri"] for i in result["items"]] == [uri("big")]
