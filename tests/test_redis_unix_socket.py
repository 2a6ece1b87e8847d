"""A board on a ``unix://`` URL: both kinds of the store's Redis connections (redis-py's and
its own, store/connection/_wire.py) reach a Redis that listens on a Unix socket only."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from store_support import write_read_list_and_search
from support import child_process

from blackboard_mcp.store.embedded._embedded import find_binaries

PASSWORD = "unix-socket-test"


@pytest.fixture
def unix_url(tmp_path: Path) -> Iterator[str]:
    binaries = find_binaries()
    socket = tmp_path / "redis.sock"
    server = child_process(
        [
            str(binaries.server),
            "--port", "0",  # no TCP at all
            "--unixsocket", str(socket),
            "--unixsocketperm", "700",
            "--requirepass", PASSWORD,
            "--save", "",
            "--appendonly", "no",
            "--dir", str(tmp_path),
            "--loadmodule", str(binaries.search_module),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"unix://:{PASSWORD}@{socket}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if redis.Redis.from_url(url).ping():
                    break
            except redis.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(10)


async def test_a_board_on_a_unix_socket_url_writes_reads_and_searches(unix_url: str) -> None:
    await write_read_list_and_search(unix_url)
