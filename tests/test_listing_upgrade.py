"""A board written when each topic kept a sorted set by recency lists the same after the upgrade.

That set (``bbt:{ws}:<topic>``) held every note of the topic scored by its last write's
sequence number: the union of the topic's three sets by kind, which carry the same scores.
This version serves ``recent`` order and the change feed from the sets by kind, writes no
such set, and removes the old ones when a board starts.
"""

from __future__ import annotations

from store_support import raw

from blackboard_mcp.store import Board, ListKeys, UpdateState, board_client

WS = "up"


def _old_recency_key(topic: str) -> str:
    # Spelled out rather than taken from store/connection/_key_names.py, which no longer names it.
    return f"bbt:{{{WS}}}:{topic}"


async def _write_old_board(url: str) -> list[str]:
    """Notes of every kind in two topics, plus the recency sets the earlier version kept."""
    board = Board(client=board_client(url))
    written = []
    try:
        for i in range(9):
            topic = "a" if i % 2 else "b"
            address = f"bb://{WS}/{topic}/n{i}"
            if i % 3 == 0:
                await board.update_state(
                    UpdateState.parse(
                        {
                            "uri": address,
                            "digest": f"table {i}",
                            "columns": ["c"],
                            "rows": [[str(i)]],
                        }
                    ),
                    author="x",
                )
            else:
                await board.update_state(
                    UpdateState.parse({"uri": address, "digest": f"note {i}", "body": "b"}),
                    author="x",
                )
            written.append(address)
        # n1 written again: it moves to the front of the recent order.
        await board.update_state(
            UpdateState.parse({"uri": f"bb://{WS}/a/n1", "digest": "again", "body": "c"}),
            author="x",
        )
        written.remove(f"bb://{WS}/a/n1")
        written.append(f"bb://{WS}/a/n1")
    finally:
        await board.close()
    client = raw(url)
    try:
        for topic in ("a", "b"):
            kinds = [k for k in client.scan_iter(match=f"bbtk:{{{WS}}}:{topic}:*")]
            scored = {m: s for k in kinds for m, s in client.zrange(k, 0, -1, withscores=True)}
            client.zadd(_old_recency_key(topic), scored)
    finally:
        client.close()
    return written


async def test_an_old_board_lists_recent_and_changes_the_same_and_loses_its_recency_sets(
    redis_url: str,
) -> None:
    written = await _write_old_board(redis_url)
    client = raw(redis_url)
    assert client.exists(_old_recency_key("a"), _old_recency_key("b")) == 2

    board = Board(client=board_client(redis_url))
    try:
        await board.start()
        assert client.exists(_old_recency_key("a"), _old_recency_key("b")) == 0
        listed = await board.list_keys(
            ListKeys.parse({"order": "recent", "limit": 50}), workspace=WS
        )
        assert [i["uri"] for i in listed["items"]] == written[::-1]
        # Walked a page at a time, the same order.
        pages: list[str] = []
        after = None
        while True:
            page = await board.list_keys(
                ListKeys.parse({"order": "recent", "limit": 4, "after": after}), workspace=WS
            )
            pages += [i["uri"] for i in page["items"]]
            after = page.get("next")
            if after is None:
                break
        assert pages == written[::-1]
        changes = await board.list_keys(ListKeys.parse({"cursor": 0, "limit": 50}), workspace=WS)
        assert [i["uri"] for i in changes["items"]] == written
        await board.update_state(
            UpdateState.parse({"uri": f"bb://{WS}/b/n0", "digest": "new", "body": "d"}), author="x"
        )
        assert client.exists(_old_recency_key("b")) == 0
        latest = await board.list_keys(
            ListKeys.parse({"order": "recent", "limit": 1}), workspace=WS
        )
        assert [i["uri"] for i in latest["items"]] == [f"bb://{WS}/b/n0"]
    finally:
        client.close()
        await board.close()
