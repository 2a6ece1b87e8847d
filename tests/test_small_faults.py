"""Small faults an operator meets in the log or at the edge: none is a warning or a traceback
when nothing is wrong.

An idle change feed answers an empty read before the operation deadline (it used to log
"Redis did not answer" every few seconds on a quiet board); every route checks the Host as
``/mcp/`` does; a client that goes away mid-body is one log line. Real Redis; the gateway in
process where the HTTP edge is what is tested.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from app_support import in_process_gateway
from support import admin_token, agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import Board


async def test_an_idle_feed_answers_empty_before_the_deadline(redis_url: str) -> None:
    board = Board.from_url(redis_url, timeout_seconds=1.0)
    try:
        feed = await board.open_feed("quiet")
        try:
            # The feed's own connection, opened once (not what this measures).
            await feed.next(block_ms=1)
            began = time.monotonic()
            # Asked to wait far longer than an operation may take: answered empty within the
            # deadline, never Unavailable.
            assert await feed.next(block_ms=60_000) == []
            assert time.monotonic() - began < 1.0
        finally:
            await feed.close()
    finally:
        await board.close()


async def test_every_route_checks_the_host_as_the_mcp_endpoint_does(
    redis_url: str, tmp_path: Path, issuer: TokenIssuer, workspace: str
) -> None:
    admin = {"Authorization": f"Bearer {admin_token(issuer, workspace)}"}
    async with in_process_gateway(redis_url, tmp_path) as app:
        for path in ("/board", "/board/api/topics", "/admin/tokens", "/admin/retention"):
            bad = await app.http.get(path, headers={**admin, "Host": "evil.example:8765"})
            assert bad.status_code == 421, (path, bad.text)
            assert bad.json()["error"]["code"] == "forbidden"
            good = await app.http.get(path, headers=admin)
            assert good.status_code == 200, (path, good.text)
        # The probes answer whoever asks by address.
        probe = await app.http.get("/healthz", headers={"Host": "10.0.0.7:8765"})
        assert probe.status_code == 200


async def test_a_client_gone_mid_body_is_one_log_line_not_a_traceback(
    redis_url: str,
    tmp_path: Path,
    issuer: TokenIssuer,
    workspace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = agent_token(issuer, workspace)
    async with in_process_gateway(redis_url, tmp_path) as app:
        messages = iter(
            [
                {"type": "http.request", "body": b"{", "more_body": True},
                {"type": "http.disconnect"},
            ]
        )
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return next(messages)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/board/api/call",
            "raw_path": b"/board/api/call",
            "query_string": b"",
            "root_path": "",
            "server": ("127.0.0.1", 8765),
            "client": ("127.0.0.1", 40000),
            "headers": [
                (b"host", b"127.0.0.1:8765"),
                (b"authorization", f"Bearer {token}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", b"100"),
            ],
        }
        with caplog.at_level(logging.INFO):
            await app.app(scope, receive, send)  # type: ignore[arg-type]
    logged = [r for r in caplog.records if "went away" in r.getMessage()]
    assert len(logged) == 1
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records]
