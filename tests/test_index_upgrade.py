"""A board written under an earlier search index still searches after the upgrade.

The index has a versioned name (store/connection/_key_names.py). A release that changes its options
names a new index; starting a board builds it from the notes already there and drops the old one,
keeping the notes.
"""

from __future__ import annotations

import pytest
import redis
from store_support import raw

from blackboard_mcp.store import Board, GetState, SearchKeys, UpdateState, board_client
from blackboard_mcp.store.connection._key_names import INDEX_NAME, NOTE_PREFIX, digest_index
from blackboard_mcp.store.connection._search_index import wait_until_indexed

# The first index as its release created it: the same fields, term offsets kept.
V1_CREATE = [
    "FT.CREATE",
    "bb-notes-v1",
    "ON",
    "HASH",
    "PREFIX",
    "1",
    "bbn:",
    "SCHEMA",
    "ws",
    "TAG",
    "SEPARATOR",
    ",",
    "topic",
    "TAG",
    "SEPARATOR",
    ",",
    "kind",
    "TAG",
    "SEPARATOR",
    ",",
    "digest",
    "TEXT",
    "WEIGHT",
    "5.0",
    "body",
    "TEXT",
    "stext",
    "TEXT",
    "updated",
    "NUMERIC",
    "SORTABLE",
]

# The second, as its release created it: one index, without term positions.
V2_CREATE = ["bb-notes-v2" if arg == "bb-notes-v1" else arg for arg in V1_CREATE[:7]] + [
    "NOOFFSETS",
    *V1_CREATE[7:],
]
CURRENT = {INDEX_NAME, digest_index(INDEX_NAME)}


def _indexes(url: str) -> set[str]:
    client = raw(url)
    try:
        return {n.decode() for n in client.execute_command("FT._LIST")}
    finally:
        client.close()


# The third, as its release created them: the notes index without term positions,
# frequencies or field flags, and the digests index beside it; neither had `seq`.
_V3_OPTIONS = ["ON", "HASH", "PREFIX", "1", "bbn:", "NOOFFSETS", "NOFREQS", "NOFIELDS"]
_TAG = ["TAG", "SEPARATOR", ","]
V3_CREATE = [
    ["FT.CREATE", "bb-notes-v3", *_V3_OPTIONS, "SCHEMA", "ws", *_TAG, "topic", *_TAG,
     "kind", *_TAG, "digest", "TEXT", "body", "TEXT", "stext", "TEXT", "updated", "NUMERIC"],
    ["FT.CREATE", "bb-digests-v1", *_V3_OPTIONS, "SCHEMA", "ws", *_TAG, "topic", *_TAG,
     "digest", "TEXT"],
]  # fmt: skip


@pytest.mark.parametrize("creates", [[V1_CREATE], [V2_CREATE], V3_CREATE], ids=["v1", "v2", "v3"])
async def test_an_old_board_searches_its_notes_after_the_upgrade_and_the_old_index_is_gone(
    redis_url: str, creates: list[list[str]]
) -> None:
    for create in creates:
        raw(redis_url).execute_command(*create)
    old = Board(client=board_client(redis_url))
    for i in range(30):
        await old.update_state(
            UpdateState.parse(
                {
                    "uri": f"bb://up/t/n{i}",
                    "digest": f"note {i} about walrus migration" if i == 7 else f"note {i}",
                    "body": "the hidden word is ptarmigan" if i == 11 else "plain body",
                }
            ),
            author="a",
        )
    await old.client.aclose()  # type: ignore[attr-defined]
    assert _indexes(redis_url) == {create[1] for create in creates}

    board = Board(client=board_client(redis_url))
    try:
        await board.start()
        assert await wait_until_indexed(board.redis.routed, timeout=10)
        assert _indexes(redis_url) == CURRENT
        info = await board.client.ft(INDEX_NAME).info()  # type: ignore[no-untyped-call]
        options = {o.decode() if isinstance(o, bytes) else o for o in info["index_options"]}
        assert {"NOOFFSETS", "NOFREQS", "NOFIELDS"} <= options
        for name in CURRENT:
            fields = (await board.client.ft(name).info())["attributes"]  # type: ignore[no-untyped-call]
            assert any(b"seq" in field or "seq" in field for field in fields), name
        by_digest = await board.search_keys(SearchKeys.parse({"q": "walrus"}), workspace="up")
        assert [i["uri"] for i in by_digest["items"]] == ["bb://up/t/n7"]
        assert by_digest["items"][0]["digest"] == "note 7 about walrus migration"
        by_body = await board.search_keys(SearchKeys.parse({"q": "ptarmigan"}), workspace="up")
        assert [i["uri"] for i in by_body["items"]] == ["bb://up/t/n11"]
        # The notes themselves were kept: dropped without DD.
        read = await board.get_state(GetState.parse({"uris": ["bb://up/t/n11"], "mode": "full"}))
        assert read["items"][0]["body"] == "the hidden word is ptarmigan"
        # A second start (another worker, a restart) has nothing left to drop.
        await board.start()
        assert _indexes(redis_url) == CURRENT
    finally:
        await board.close()


async def test_the_embedded_redis_keeps_a_kilobyte_note_in_one_listpack(
    redis_url: str, board: Board
) -> None:
    await board.update_state(
        UpdateState.parse({"uri": "bb://ws/t/big", "digest": "d", "body": "word " * 220}),
        author="a",
    )
    client = redis.Redis.from_url(redis_url)
    try:
        [key] = client.keys(f"{NOTE_PREFIX}*")
        assert client.object("encoding", key) == b"listpack"
    finally:
        client.close()
