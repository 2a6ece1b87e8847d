"""The embedded Redis keeps the board across a stop and a start, and across a crash; with
appendfsync always, an acknowledged write is on the disk, not only in the page cache."""

from __future__ import annotations

import ctypes
import mmap
import os
import socket
import struct
from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis.asyncio as aioredis

from blackboard_mcp.store import (
    Board,
    EmbeddedRedis,
    EmbeddedRedisError,
    GetState,
    LinkState,
    SearchKeys,
    UpdateState,
    board_client,
)
from blackboard_mcp.store.embedded import _embedded as embedded


async def _write(url: str, count: int) -> None:
    board = Board(client=board_client(url))
    await board.start()
    try:
        for i in range(count):
            await board.update_state(
                UpdateState.parse(
                    {
                        "uri": f"bb://w/t/n{i}",
                        "digest": f"walrus note {i}",
                        "body": "x" * (20_000 if i == 0 else 10),
                        "expect_version": 0,
                    }
                ),
                author="a",
            )
        await board.link_state(
            LinkState.parse({"src": "bb://w/t/n1", "rel": "cites", "dst": ["bb://w/t/n0"]}),
            author="a",
        )
    finally:
        await board.close()


async def _read(url: str, count: int) -> tuple[dict[str, object], dict[str, object]]:
    board = Board(client=board_client(url))
    await board.start()
    try:
        uris = [f"bb://w/t/n{i}" for i in range(count)]
        read = await board.get_state(
            GetState.parse({"uris": uris, "mode": "ref", "budget_tokens": 100_000})
        )
        full = await board.get_state(
            GetState.parse(
                {"uris": ["bb://w/t/n0", "bb://w/t/n1"], "mode": "full", "budget_tokens": 100_000}
            )
        )
        found = await board.search_keys(
            SearchKeys.parse({"q": "walrus", "limit": 50}), workspace="w"
        )
        return {"read": read, "full": full}, found
    finally:
        await board.close()


# A SIGKILLed Redis leaves what it wrote in the kernel's page cache, so the restart below
# proves the AOF, not fsync; test_with_fsync_always_... proves the fsync.
@pytest.mark.slow
@pytest.mark.parametrize("crash", [False, True], ids=["clean-stop", "sigkill"])
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


KPF_DIRTY = 4  # linux/kernel-page-flags.h


def _dirty_pages(path: Path) -> tuple[int, int]:
    """(dirty, resident) pages of ``path`` in the page cache, from the kernel's page flags.

    The file is mapped (never written), each page's frame number is read from
    /proc/self/pagemap and its flags from /proc/kpageflags; both need root. A page is dirty
    from a write until it reaches the disk, by fsync or by the kernel's writeback (about 30 s
    later by default).
    """
    size = path.stat().st_size
    page = mmap.PAGESIZE
    fd = os.open(path, os.O_RDWR)
    try:
        # MAP_POPULATE: without it, reading a page through the map did not always install it
        # in the page table here, and pagemap then reports it absent.
        mapped = mmap.mmap(
            fd, size, mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE
        )
    finally:
        os.close(fd)
    anchor = ctypes.c_char.from_buffer(mapped)
    first = ctypes.addressof(anchor) // page
    dirty = resident = 0
    try:
        with open("/proc/self/pagemap", "rb") as pagemap, open("/proc/kpageflags", "rb") as flags:
            for i in range((size + page - 1) // page):
                pagemap.seek((first + i) * 8)
                entry = struct.unpack("<Q", pagemap.read(8))[0]
                if not entry >> 63 & 1:
                    continue
                resident += 1
                flags.seek((entry & ((1 << 55) - 1)) * 8)
                dirty += struct.unpack("<Q", flags.read(8))[0] >> KPF_DIRTY & 1
    finally:
        del anchor
        mapped.close()
    return dirty, resident


def _aof(data_dir: Path) -> Path:
    [aof] = data_dir.rglob("*.incr.aof")
    return aof


def aof_size(data_dir: Path) -> int:
    return _aof(data_dir).stat().st_size


def _aof_dirty_pages(data_dir: Path) -> tuple[int, int]:
    return _dirty_pages(_aof(data_dir))


@pytest.mark.slow
@pytest.mark.skipif(
    not os.access("/proc/kpageflags", os.R_OK),
    reason="page flags (/proc/kpageflags) can only be read as root on Linux",
)
async def test_with_fsync_always_no_acknowledged_write_waits_in_the_page_cache(
    tmp_path: Path,
) -> None:
    server = EmbeddedRedis(data_dir=tmp_path, appendfsync="always")
    server.start()
    try:
        await _write(server.url, 30)
        dirty, resident = _aof_dirty_pages(tmp_path)
        assert resident == (aof_size(tmp_path) + mmap.PAGESIZE - 1) // mmap.PAGESIZE > 1
        assert dirty == 0, f"{dirty} of {resident} AOF pages were never fsynced"
        # The same look sees the writes of a Redis that leaves flushing to the kernel: the
        # check above can fail.
        # (A few tries: the kernel's own writeback, under another process's load, may have
        # flushed one batch before the look.)
        client = aioredis.Redis.from_url(server.url)
        seen = []
        try:
            await client.config_set("appendfsync", "no")
            for attempt in range(5):
                for i in range(50):
                    await client.set(f"filler-{attempt}-{i}", "x" * 200)
                seen.append(_aof_dirty_pages(tmp_path))
                if seen[-1][0] > 0:
                    break
        finally:
            await client.aclose()
        assert seen[-1][0] > 0, seen
    finally:
        server.stop()


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


def test_a_crash_report_quotes_redis_s_last_words_not_its_start_up_advice(
    tmp_path: Path,
) -> None:
    # Redis logs kernel advice at every start; a crash soon after must not read as caused by it.
    server = EmbeddedRedis(data_dir=tmp_path)
    (tmp_path / EmbeddedRedis.LOG_FILE).write_text(
        "1:M 05 Dec 2026 20:00:00.000 * Redis version=8.2.1, bits=64\n"
        "1:M 05 Dec 2026 20:00:00.001 # WARNING Memory overcommit must be enabled! Without it, "
        "a background save or replication may fail under low memory condition.\n"
        "1:M 05 Dec 2026 20:00:00.002 # WARNING: The TCP backlog setting of 511 cannot be "
        "enforced because /proc/sys/net/core/somaxconn is set to the lower value of 128.\n"
        "1:M 05 Dec 2026 20:00:00.003 # Can't open the append-only file: Permission denied\n"
    )
    tail = server.log_tail()
    assert "append-only file: Permission denied" in tail
    assert "overcommit" not in tail and "somaxconn" not in tail


def test_a_free_port_is_never_one_this_process_handed_out_lately(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A port is free when it is handed out and bound seconds later: the system may offer the
    # same port to the next asker meanwhile. Two gateways a test started side by side were
    # given one port; the second exited on it, and the first answered for both.
    offered = iter([5101, 5101, 5102])

    class _Socket:
        def __init__(self, *args: Any) -> None:
            pass

        def __enter__(self) -> _Socket:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def bind(self, address: tuple[str, int]) -> None:
            pass

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", next(offered))

    fake = SimpleNamespace(socket=_Socket, AF_INET=socket.AF_INET, SOCK_STREAM=socket.SOCK_STREAM)
    monkeypatch.setattr(embedded, "socket", fake)
    monkeypatch.setattr(embedded, "_handed_out", deque(maxlen=8), raising=False)
    assert [embedded.free_port(), embedded.free_port()] == [5101, 5102]
