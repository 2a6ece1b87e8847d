"""The embedded Redis keeps the board across a stop and a start, and across a crash."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis

from blackboard_mcp.store import Board, EmbeddedRedis, EmbeddedRedisError
from blackboard_mcp.store import _embedded as embedded


async def _write(url: str, count: int) -> None:
    board = Board(client=aioredis.Redis.from_url(url))
    await board.start()
    try:
        for i in range(count):
            await board.update_state(
                author="a",
                uri=f"bb://w/t/n{i}",
                digest=f"walrus note {i}",
                body="x" * (20_000 if i == 0 else 10),
                expect_version=0,
            )
        await board.link_state(author="a", src="bb://w/t/n1", rel="cites", dst=["bb://w/t/n0"])
    finally:
        await board.close()


async def _read(url: str, count: int) -> tuple[dict[str, object], dict[str, object]]:
    board = Board(client=aioredis.Redis.from_url(url))
    await board.start()
    try:
        uris = [f"bb://w/t/n{i}" for i in range(count)]
        read = await board.get_state(uris=uris, mode="ref", budget_tokens=100_000)
        full = await board.get_state(
            uris=["bb://w/t/n0", "bb://w/t/n1"], mode="full", budget_tokens=100_000
        )
        found = await board.search_keys(workspace="w", q="walrus", limit=50)
        return {"read": read, "full": full}, found
    finally:
        await board.close()


@pytest.mark.slow
@pytest.mark.parametrize("crash", [False, True], ids=["clean-stop", "kill-with-fsync-always"])
async def test_every_acknowledged_write_survives_a_restart(tmp_path: Path, crash: bool) -> None:
    server = EmbeddedRedis(data_dir=tmp_path, appendfsync="always" if crash else "everysec")
    server.start()
    await _write(server.url, 30)
    if crash:
        server.kill()
    else:
        server.stop()
    server.start()
    try:
        reads, found = await _read(server.url, 30)
    finally:
        server.stop()
    items = reads["read"]["items"]  # type: ignore[index]
    assert [i["version"] for i in items] == [1] * 30
    full = reads["full"]["items"]  # type: ignore[index]
    assert full[0]["body"] == "x" * 20_000
    assert full[1]["links"] == [{"rel": "cites", "to": "bb://w/t/n0"}]
    assert len(found["items"]) == 30  # type: ignore[arg-type]


def test_missing_wheels_say_how_to_get_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EmbeddedRedisError, match=r"blackboard-mcp\[embedded\]"):
        embedded.find_binaries()


def test_a_redis_started_from_a_short_lived_thread_outlives_that_thread(tmp_path: Path) -> None:
    """The parent-death signal fires when the forking *thread* ends: Redis is forked from a
    thread that lives as long as the process, so a start from an executor thread sticks."""
    import threading
    import time

    import redis

    server = EmbeddedRedis(data_dir=tmp_path)
    starter = threading.Thread(target=server.start)
    starter.start()
    starter.join()
    try:
        time.sleep(0.5)  # a SIGTERM from the kernel would have shut it down by now
        assert server.running
        assert redis.Redis.from_url(server.url).ping()
    finally:
        server.stop()
