"""The gateway process drops slow and surplus connections and keeps serving everyone else.

A real `blackboard-mcp serve` with short limits (BB_HEADER_TIMEOUT_SECONDS and friends),
raw sockets playing the slow clients, and httpx playing the normal one.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx
import pytest
from support import GatewayProcess, agent_token, call, mcp_client, start_gateway, stop_gateway

if TYPE_CHECKING:
    from blackboard_mcp.auth import TokenIssuer
    from blackboard_mcp.store import EmbeddedRedis

HEADER_TIMEOUT = 2.0
BODY_TIMEOUT = 2.0
MAX_CONNECTIONS = 150
MAX_HEADER_BYTES = 16 * 1024
SLOW_CLIENTS = 100
# How long past a timeout the server may take to act on it, on a busy two-core machine.
GRACE = 3.0


@pytest.fixture(scope="module")
def limited_gateway(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    if not redis_server.running:
        redis_server.start()
    process = start_gateway(
        redis_server.url,
        tmp_path_factory.mktemp("limited-gateway"),
        extra_env={
            "BB_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
            "BB_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
            "BB_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
            "BB_MAX_HEADER_BYTES": str(MAX_HEADER_BYTES),
        },
    )
    yield process
    stop_gateway(process)


def _connect(gateway: GatewayProcess) -> socket.socket:
    parts = urlsplit(gateway.url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed: EOF (after any answer it wrote) or a reset."""
    sock.setblocking(False)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def _answer(sock: socket.socket, wait: float) -> bytes:
    """Everything the server sends until it closes, waiting at most ``wait`` seconds."""
    sock.settimeout(wait)
    data = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


class Healthz:
    """Polls /healthz on its own thread and keeps the slowest answer (99 s for a failure)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.slowest = 0.0
        self.answers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=5.0) as http:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    ok = http.get(self.url + "/healthz").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.slowest = max(self.slowest, time.monotonic() - started if ok else 99.0)
                self.answers += ok
                time.sleep(0.1)

    def __enter__(self) -> Healthz:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


async def test_slow_header_connections_are_closed_after_the_header_timeout(
    limited_gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    socks = [_connect(limited_gateway) for _ in range(SLOW_CLIENTS)]
    closed_at: dict[int, float] = {}
    started = time.monotonic()
    try:
        for sock in socks:
            sock.sendall(b"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        with Healthz(limited_gateway.url) as health:
            token = agent_token(issuer, workspace)
            async with mcp_client(limited_gateway.mcp_url, token) as client:
                n = 0
                while len(closed_at) < len(socks):
                    now = time.monotonic()
                    if now - started > HEADER_TIMEOUT + GRACE:
                        break
                    for i, sock in enumerate(socks):
                        if i in closed_at:
                            continue
                        try:  # slowloris: one more header line now and then, never the end
                            sock.sendall(f"X-Drip-{n}: {i}\r\n".encode())
                        except OSError:
                            closed_at[i] = time.monotonic()
                            continue
                        if _closed_by_server(sock):
                            closed_at[i] = time.monotonic()
                    n += 1
                    # A normal caller is served meanwhile.
                    is_error, body = await call(
                        client,
                        "update_state",
                        uri=f"bb://{workspace}/t/n{n}",
                        digest="still here",
                        body="",
                    )
                    assert not is_error, body
                    await asyncio.sleep(0.2)
    finally:
        for sock in socks:
            sock.close()
    assert len(closed_at) == len(socks), f"{len(socks) - len(closed_at)} slow clients still held"
    earliest = min(closed_at.values()) - started
    assert earliest >= HEADER_TIMEOUT * 0.75, f"closed after {earliest:.2f} s, before the timeout"
    assert health.answers > 0 and health.slowest < 1.0, (health.answers, health.slowest)


def test_a_connection_that_sends_nothing_is_closed_too(limited_gateway: GatewayProcess) -> None:
    sock = _connect(limited_gateway)
    try:
        started = time.monotonic()
        answer = _answer(sock, HEADER_TIMEOUT + GRACE)
        took = time.monotonic() - started
    finally:
        sock.close()
    assert took < HEADER_TIMEOUT + GRACE, "the idle connection was never closed"
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_slow_body_is_cut_off_after_the_body_timeout(limited_gateway: GatewayProcess) -> None:
    sock = _connect(limited_gateway)
    try:
        sock.sendall(
            b"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < BODY_TIMEOUT + GRACE:
            try:
                sock.sendall(b" ")
            except OSError:
                closed = True
                break
            if _closed_by_server(sock):
                closed = True
                break
            time.sleep(0.2)
    finally:
        sock.close()
    assert closed, "a body trickling in was held past the body timeout"


def test_oversized_headers_are_refused_with_431(limited_gateway: GatewayProcess) -> None:
    sock = _connect(limited_gateway)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        line = b"X-Filler: " + b"f" * 1000 + b"\r\n"
        with contextlib.suppress(OSError):  # the server may close while we still write
            for _ in range(2 * MAX_HEADER_BYTES // len(line)):
                sock.sendall(line)
        answer = _answer(sock, GRACE)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]


def test_connections_over_the_cap_are_refused_at_once(limited_gateway: GatewayProcess) -> None:
    held: list[socket.socket] = []
    try:
        # Fill the cap with idle connections (give or take the test's other clients).
        for _ in range(MAX_CONNECTIONS + 5):
            held.append(_connect(limited_gateway))
        extra = _connect(limited_gateway)
        held.append(extra)
        started = time.monotonic()
        answer = _answer(extra, HEADER_TIMEOUT / 2)
        took = time.monotonic() - started
    finally:
        for sock in held:
            sock.close()
    assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
    assert took < HEADER_TIMEOUT / 2
    # Once they are gone, a normal client is served again.
    deadline = time.monotonic() + GRACE
    while True:
        try:
            if httpx.get(limited_gateway.url + "/healthz", timeout=1.0).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the gateway did not recover after the flood"
        time.sleep(0.1)


def test_second_request_on_a_kept_alive_connection_has_its_own_header_deadline(
    limited_gateway: GatewayProcess,
) -> None:
    sock = _connect(limited_gateway)
    try:
        time.sleep(HEADER_TIMEOUT * 0.75)  # most of the first deadline spent, then a request
        # Not /healthz: a probe's connection is closed after its answer.
        sock.sendall(b"GET /nothing-here HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.settimeout(GRACE)
        first = b""
        # The whole answer: its headers, then its JSON body (an object ends the body).
        while b"\r\n\r\n" not in first or not first.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, first
            first += chunk
        assert first.startswith(b"HTTP/1.1 404 "), first
        # The next request starts at once but never finishes its headers.
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        answer = _answer(sock, HEADER_TIMEOUT + GRACE)
        took = time.monotonic() - started
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert HEADER_TIMEOUT * 0.75 <= took < HEADER_TIMEOUT + GRACE, took


def test_the_protocol_module_imports_neither_the_gateway_nor_the_sdk() -> None:
    # Each spawned uvicorn worker unpickles the protocol before it answers the supervisor's
    # health pings; pulling in the SDK there got workers killed as hung on a busy machine.
    probe = (
        "import sys, blackboard_mcp._uvicorn_adapter; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'starlette') "
        "or m.startswith('blackboard_mcp.gateway')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]", result.stdout


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bytes, bool]:
    """What the server sent, and whether it closed the connection within ``seconds``."""
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return data, False
    return data, True


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_an_unauthenticated_probe_does_not_keep_its_connection(
    gateway: GatewayProcess, path: str
) -> None:
    # Kept alive, a handful of probe sockets held every slot of a small BB_MAX_CONNECTIONS:
    # what anyone may ask without a token is answered, then the connection is closed.
    sock = _connect(gateway)
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        data, closed = _closed_within(sock, GRACE)
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 "), data[:100]
    assert b"connection: close" in data.lower()
    assert closed


def test_a_refused_token_less_post_is_closed_at_once_whatever_body_it_announced(
    gateway: GatewayProcess,
) -> None:
    # A POST without a token announcing 100,000 bytes, then trickling: answered 401, and
    # closed then, not after the body deadline.
    sock = _connect(gateway)
    try:
        sock.sendall(
            b"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{"
        )
        data, closed = _closed_within(sock, GRACE)
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 401 "), data[:100]
    assert closed
