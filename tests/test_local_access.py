"""Other local users of the host: the embedded Redis wants a password, the data dir is private."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from serve_support import kill_leftovers, serve_env, start_serve, stop

from blackboard_mcp.store import EmbeddedRedis


@pytest.fixture(autouse=True)
def _no_serve_left_behind() -> Iterator[None]:
    yield
    kill_leftovers()


def test_a_plain_tcp_client_without_the_password_is_refused(tmp_path: Path) -> None:
    server = EmbeddedRedis(data_dir=tmp_path / "redis").start()
    try:
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = sock.recv(1024)
        assert reply.startswith(b"-NOAUTH"), reply
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host=server.host, port=server.port).ping()
        # The URL the product hands out carries the password and works.
        assert redis.Redis.from_url(server.url).ping()
        # ps shows no password: it travels in a 0600 config file, not on the command line.
        password = server.url.split("@")[0].rsplit(":", 1)[1]
        assert len(password) >= 32
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
        assert password.encode() not in cmdline
    finally:
        server.stop()


@pytest.mark.slow
def test_everything_serve_creates_under_the_data_dir_is_private_and_the_cli_finds_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    serve = start_serve(data, jwt=False)
    try:
        modes = {
            path.relative_to(tmp_path): stat.S_IMODE(path.stat().st_mode)
            for path in [data, *data.rglob("*")]
        }
        assert (Path("data") / "redis.url") in modes
        assert any(path.name.startswith("appendonly") for path in modes)
        loose = {
            str(path): oct(mode)
            for path, mode in modes.items()
            if mode & 0o077 or (mode & 0o111 and not (tmp_path / path).is_dir())
        }
        assert loose == {}, loose
        # The CLI finds the URL with the password in the data dir by itself.
        env = serve_env(data, jwt=False)
        health = subprocess.run(
            [sys.executable, "-m", "blackboard_mcp.cli", "health"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert health.returncode == 0, health.stdout + health.stderr
        assert '"redis": "ok"' in health.stdout
        url = (data / "redis.url").read_text().strip()
        client = redis.Redis.from_url(url)
        assert client.ping()
        # The workers reach Redis by its socket in the data dir (0600, checked above).
        socket_path = data / "redis" / "redis.sock"
        assert socket_path.relative_to(tmp_path) in modes
        addresses = [c["laddr"] for c in client.client_list()]
        # (Redis cuts a long address short.)
        by_socket = [a for a in addresses if a.startswith("/")]
        assert by_socket, addresses
        assert all(str(socket_path.resolve()).startswith(a.split(":")[0]) for a in by_socket)
        client.close()
        assert os.stat(data / "redis.url").st_mode & 0o777 == 0o600
    finally:
        stop(serve, signal.SIGTERM)
