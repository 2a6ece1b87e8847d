"""Responses stay whole and in order on the wire: keep-alive, pipelining, HEAD, errors, streams.

The gateway's HTTP server writes each response's head together with its body. These tests
speak raw HTTP/1.1 to a real gateway process and read the bytes back, so that a head held
back too long (a HEAD answer, a stream), a head written twice, or a response cut into the
next one's shows up as a hang, a garbled status line or a wrong body.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
from support import GatewayProcess, agent_token

from blackboard_mcp.store import RedisAuditLog, SingleRedis, board_client

if TYPE_CHECKING:
    from blackboard_mcp.auth import TokenIssuer
    from blackboard_mcp.store import EmbeddedRedis

TIMEOUT = 10.0
# request() cannot know the port; Wire.send puts the connection's host:port in its place.
HOST_PLACEHOLDER = b"host: {host}"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


class Wire:
    """One client connection, reading responses exactly as an HTTP/1.1 client must."""

    def __init__(self, gateway: GatewayProcess) -> None:
        parts = urlsplit(gateway.url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=TIMEOUT)
        self.host = parts.netloc
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data.replace(HOST_PLACEHOLDER, b"host: " + self.host.encode()))

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def _take_until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def _take(self, count: int) -> bytes:
        while len(self.buffer) < count:
            self._fill()
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def head(self) -> tuple[int, dict[str, str]]:
        lines = self._take_until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        version, status, *_ = lines[0].split(" ")
        assert version == "HTTP/1.1", lines[0]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            assert name.lower() not in headers, f"header {name} twice: {lines}"
            headers[name.lower()] = value.strip()
        return int(status), headers

    def chunk(self) -> bytes:
        size = int(self._take_until(b"\r\n"), 16)
        data = self._take(size)
        assert self._take(2) == b"\r\n"
        return data

    def answer(self, *, head_only: bool = False) -> Answer:
        status, headers = self.head()
        if head_only:
            return Answer(status, headers, b"")
        if headers.get("transfer-encoding") == "chunked":
            chunks = []
            while chunk := self.chunk():
                chunks.append(chunk)
            assert self._take(2) == b"\r\n"
            return Answer(status, headers, b"".join(chunks))
        return Answer(status, headers, self._take(int(headers["content-length"])))

    def closed_by_server(self) -> bool:
        if self.buffer:
            return False
        return self.sock.recv(1) == b""

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def wire(gateway: GatewayProcess) -> Iterator[Wire]:
    connection = Wire(gateway)
    yield connection
    connection.close()


@pytest.fixture
def token(issuer: TokenIssuer, workspace: str) -> str:
    return agent_token(issuer, workspace)


def request(
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", HOST_PLACEHOLDER.decode()]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if (body or method == "POST") and "transfer-encoding" not in (headers or {}):
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def tool_call(token: str, uri: str, digest: str, *, extra: dict[str, str] | None = None) -> bytes:
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": digest,
            "method": "tools/call",
            "params": {
                "name": "update_state",
                "arguments": {"uri": uri, "digest": digest, "body": ""},
            },
        }
    )
    headers = {
        "authorization": f"Bearer {token}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
        **(extra or {}),
    }
    return request("POST", "/mcp/", body=body, headers=headers)


def written(answer: Answer, digest: str) -> int:
    """The version a successful update_state answered, after checking it answered ``digest``."""
    assert answer.status == 200, answer
    assert answer.headers["content-type"] == "application/json"
    message = orjson.loads(answer.body)
    assert message["id"] == digest
    assert not message["result"]["isError"], message
    version: int = message["result"]["structuredContent"]["version"]
    return version


def test_tool_calls_on_one_kept_alive_connection_each_get_their_whole_answer(
    wire: Wire, token: str, workspace: str
) -> None:
    versions = []
    for step in range(5):
        wire.send(tool_call(token, f"bb://{workspace}/t/n", f"step {step}"))
        versions.append(written(wire.answer(), f"step {step}"))
    assert versions == sorted(versions) and len(set(versions)) == 5
    assert wire.buffer == b""


def test_pipelined_requests_are_answered_in_order_each_whole(
    wire: Wire, token: str, workspace: str
) -> None:
    wire.send(
        tool_call(token, f"bb://{workspace}/t/a", "first")
        + request("GET", "/board")
        + request("GET", "/mcp/", headers={"authorization": f"Bearer {token}"})
        + tool_call(token, f"bb://{workspace}/t/b", "second")
        + request("GET", "/no-such-page")
    )
    written(wire.answer(), "first")
    page = wire.answer()
    assert page.status == 200 and page.body.lstrip().lower().startswith(b"<!doctype html")
    refused = wire.answer()
    assert refused.status == 405 and refused.headers["allow"] == "POST"
    assert orjson.loads(refused.body)["error"]["code"] == "method_not_allowed"
    written(wire.answer(), "second")
    assert wire.answer().status == 404
    assert wire.buffer == b""


def test_a_head_request_gets_its_headers_without_a_body_and_the_connection_goes_on(
    wire: Wire,
) -> None:
    # A HEAD answer writes no body: its head must go out by itself, without waiting for one.
    # (The board page: a probe's connection, /healthz's, is closed after its answer.)
    wire.send(request("HEAD", "/board"))
    head = wire.answer(head_only=True)
    wire.send(request("GET", "/board"))
    page = wire.answer()
    assert head.status == page.status == 200
    assert head.headers["content-length"] == str(len(page.body))
    assert wire.buffer == b""


def test_refusals_at_the_edge_are_whole_answers_and_keep_the_connection(
    gateway: GatewayProcess, wire: Wire, token: str, workspace: str
) -> None:
    # A caller without a valid token is answered whole, then its connection is closed (it
    # holds no slot: tests/test_connection_limits.py); a caller with one keeps its own.
    anonymous = Wire(gateway)
    try:
        anonymous.send(tool_call("not-a-token", f"bb://{workspace}/t/n", "x"))
        refused = anonymous.answer()
    finally:
        anonymous.close()
    assert refused.status == 401 and "www-authenticate" in refused.headers
    assert refused.headers["connection"] == "close"
    assert orjson.loads(refused.body)["error"]["data"]["code"] == "unauthenticated"
    wire.send(request("POST", "/mcp/", body=b"{", headers={"authorization": f"Bearer {token}"}))
    assert wire.answer().status in (400, 406)
    wire.send(tool_call(token, f"bb://{workspace}/t/n", "after the refusals"))
    written(wire.answer(), "after the refusals")


def test_a_body_over_the_limit_is_refused_with_413(wire: Wire, token: str) -> None:
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    wire.send(request("POST", "/mcp/", body=b" " * (2 * 1024 * 1024 + 1), headers=headers))
    refused = wire.answer()
    assert refused.status == 413
    assert orjson.loads(refused.body)["error"]["data"]["code"] == "too_large"


def test_a_chunked_body_over_the_limit_is_refused_with_413(wire: Wire, token: str) -> None:
    # No declared length: the limit is counted as the body arrives.
    head = request(
        "POST",
        "/mcp/",
        headers={
            "authorization": f"Bearer {token}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "transfer-encoding": "chunked",
        },
    )
    piece = b" " * (256 * 1024)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(9))
    wire.send(head + chunks + b"0\r\n\r\n")
    refused = wire.answer()
    assert refused.status == 413
    assert orjson.loads(refused.body)["error"]["data"]["code"] == "too_large"


def test_expect_100_continue_gets_the_interim_answer_before_the_body_is_sent(
    wire: Wire, token: str, workspace: str
) -> None:
    whole = tool_call(token, f"bb://{workspace}/t/n", "continued", extra={"expect": "100-continue"})
    head, _, body = whole.partition(b"\r\n\r\n")
    wire.send(head + b"\r\n\r\n")
    # The server asks for the body only when the app reads it: the interim answer has to
    # reach the client while the final one is not written yet.
    interim, _ = wire.head()
    assert interim == 100
    wire.send(body)
    written(wire.answer(), "continued")


def test_a_request_asking_to_close_gets_its_answer_then_the_connection_closes(
    wire: Wire, token: str, workspace: str
) -> None:
    wire.send(tool_call(token, f"bb://{workspace}/t/n", "last", extra={"connection": "close"}))
    answer = wire.answer()
    written(answer, "last")
    assert answer.headers["connection"] == "close"
    assert wire.closed_by_server()


def test_an_event_stream_sends_its_head_and_first_event_at_once(wire: Wire, token: str) -> None:
    wire.send(
        request(
            "GET",
            "/board/api/events",
            headers={"authorization": f"Bearer {token}", "accept": "text/event-stream"},
        )
    )
    status, headers = wire.head()
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert headers["transfer-encoding"] == "chunked"
    assert wire.chunk() == b": listening\n\n"


async def test_each_call_is_audited_under_the_request_id_it_sent_or_a_fresh_one(
    wire: Wire, token: str, workspace: str, redis_server: EmbeddedRedis
) -> None:
    uri = f"bb://{workspace}/t/n"
    wire.send(tool_call(token, uri, "named", extra={"x-request-id": "req-from-the-client"}))
    written(wire.answer(), "named")
    for n in range(3):
        wire.send(tool_call(token, uri, f"unnamed {n}"))
        written(wire.answer(), f"unnamed {n}")
    client = board_client(redis_server.url)
    try:
        log = RedisAuditLog(redis=SingleRedis(client), maxlen=1000)
        for _ in range(100):
            records = await log.tail(workspace, 10)
            if len(records) >= 4:
                break
            await asyncio.sleep(0.05)
    finally:
        await client.aclose()
    ids = [r.request_id for r in reversed(records)]
    assert ids[0] == "req-from-the-client"
    assert all(re.fullmatch("[0-9a-f]{16}", rid) for rid in ids[1:]), ids
    assert len(set(ids)) == 4


def _challenge(gateway: GatewayProcess, headers: dict[str, str]) -> str:
    answer = httpx.post(
        gateway.mcp_url,
        content=b"{}",
        headers={"content-type": "application/json", **headers},
        timeout=10,
    )
    assert answer.status_code == 401, answer.text
    return answer.headers["www-authenticate"]


def test_a_forwarded_scheme_from_a_local_client_does_not_rewrite_the_metadata_url(
    gateway: GatewayProcess,
) -> None:
    # Without BB_PUBLIC_URL the metadata URL is built from the request; uvicorn trusted
    # X-Forwarded-* from any loopback client, so any local user could point clients at an
    # https:// URL of their choosing. Forwarded headers are trusted only from the addresses
    # in BB_FORWARDED_ALLOW_IPS (none by default).
    host = gateway.url.removeprefix("http://")
    plain = _challenge(gateway, {"host": host})
    forged = _challenge(gateway, {"host": host, "x-forwarded-proto": "https"})
    assert f'resource_metadata="http://{host}/' in plain
    assert forged == plain


def test_a_host_header_with_an_impossible_port_names_no_metadata_url(
    gateway: GatewayProcess,
) -> None:
    challenge = _challenge(gateway, {"host": "127.0.0.1:99999"})
    assert "resource_metadata" not in challenge
    assert "99999" not in challenge


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/no-such-page", 404),
        ("DELETE", "/healthz", 405),
        ("GET", "/.well-known/oauth-authorization-server", 404),
        ("POST", "/register", 404),
    ],
)
def test_a_path_the_board_does_not_serve_answers_json_never_plain_text(
    gateway: GatewayProcess, method: str, path: str, status: int
) -> None:
    answer = httpx.request(method, gateway.url + path, timeout=10)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    if path.startswith(("/.well-known/oauth", "/register")):
        # An OAuth client reads these as OAuth errors: say the token was the problem.
        assert (
            body["error"] == "invalid_token"
            and "not an authorization server" in (body["error_description"])
        )
    else:
        assert body["error"]["code"] == "not_found" and path in body["error"]["message"]


def test_an_unknown_path_is_told_back_cut_short(gateway: GatewayProcess) -> None:
    answer = httpx.get(gateway.url + "/" + "x" * 5000, timeout=10)
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert "x" * 150 in message and len(message) < 300
