"""`serve`'s workers and CLI reach the embedded Redis by a Unix socket in its data dir (cheaper
than TCP over loopback on both sides), private to the user, password still required; a data
dir too deep for a socket's address falls back to TCP."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import redis

from blackboard_mcp.store import Board, EmbeddedRedis, GetState, UpdateState, board_client


async def _write_and_read(url: str) -> str:
    board = Board(client=board_client(url))
    await board.start()
    try:
        written = await board.update_state(
            UpdateState.parse({"uri": "bb://w/t/n", "digest": "über den Fluss", "body": "b"}),
            author="a",
        )
        again = await board.update_state(
            UpdateState.parse(
                {"uri": "bb://w/t/n", "digest": "über die Brücke", "body": "c"}
                | {"expect_version": written["version"]}
            ),
            author="a",
        )
        assert again["version"] == 2
        read = await board.get_state(GetState.parse({"uris": ["bb://w/t/n"]}))
        return str(read["items"][0]["digest"])
    finally:
        await board.close()


async def test_the_embedded_redis_listens_on_a_private_socket_in_its_data_dir(
    tmp_path: Path,
) -> None:
    server = EmbeddedRedis(data_dir=tmp_path / "r").start()
    try:
        path = server.socket_path
        assert path is not None and path.parent == (tmp_path / "r").resolve()
        mode = path.stat().st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        assert server.local_url.startswith("unix://")
        # The store's own connections and redis-py's both go through it.
        assert await _write_and_read(server.local_url) == "über die Brücke"
        client = redis.Redis.from_url(server.local_url)
        assert client.ping()
        # Redis itself says the connection came in by the socket.
        address = client.client_info()["laddr"]
        assert address.startswith("/") and str(path).startswith(address.split(":")[0])
        client.close()
        # The socket asks for the password as TCP does.
        anonymous = redis.Redis(unix_socket_path=str(path))
        with pytest.raises(redis.AuthenticationError):
            anonymous.ping()
        anonymous.close()
    finally:
        server.stop()


async def test_a_data_dir_too_deep_for_a_socket_address_is_reached_over_tcp(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = EmbeddedRedis(data_dir=deep).start()
    try:
        assert server.socket_path is None
        assert server.local_url == server.url
        assert not (deep / EmbeddedRedis.SOCKET_FILE).exists()
        assert await _write_and_read(server.local_url) == "über die Brücke"
    finally:
        server.stop()


async def test_a_socket_redis_cannot_make_is_left_out_and_redis_is_reached_over_tcp(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A file system without sockets (some mounted volumes), or the path taken by a directory:
    # Redis cannot listen there and exits; the board must still start, over TCP.
    data = tmp_path / "r"
    (data / EmbeddedRedis.SOCKET_FILE).mkdir(parents=True)
    server = EmbeddedRedis(data_dir=data).start()
    try:
        assert server.socket_path is None
        assert server.local_url == server.url
        assert await _write_and_read(server.local_url) == "über die Brücke"
        assert any("Unix socket" in r.getMessage() for r in caplog.records)
    finally:
        server.stop()
