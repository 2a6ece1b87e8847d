"""A read fetches from Redis only what its budget can show.

Fifty notes of 1 MiB each, read at a small budget through the gateway: the bytes Redis sends
(its own ``total_net_output_bytes`` counter) stay in the kilobytes, where reading every body
moved 50 MiB into the gateway process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from support import GatewayProcess, agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis

HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def fifty_big_notes(
    gateway: GatewayProcess, issuer: TokenIssuer
) -> Iterator[tuple[httpx.Client, list[str]]]:
    workspace = "ws-amplification"
    http = httpx.Client(
        timeout=120.0,
        headers={**HEADERS, "Authorization": f"Bearer {agent_token(issuer, workspace)}"},
    )
    uris = [f"bb://{workspace}/big/n{i:02d}" for i in range(50)]
    paragraph = "Replica lag grows with the write rate of the primary. " * 20 + "\n\n"
    for i, uri in enumerate(uris):
        # Each body differs (no shared blob) and is exactly 1 MiB.
        body = (f"Note {i}. " + paragraph * (MIB // len(paragraph) + 1))[:MIB]
        reply = _call(http, gateway, "update_state", uri=uri, digest=f"Big note {i}.", body=body)
        assert not reply["isError"], reply
    yield http, uris
    http.close()


def _call(http: httpx.Client, gateway: GatewayProcess, tool: str, **args: Any) -> dict[str, Any]:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args},
    }
    response = http.post(gateway.mcp_url, content=json.dumps(request).encode())
    result: dict[str, Any] = response.json()["result"]
    return result


def _sent_by_redis(server: EmbeddedRedis) -> int:
    client = redis.Redis.from_url(server.url)
    try:
        return int(client.info("stats")["total_net_output_bytes"])
    finally:
        client.close()


@pytest.mark.parametrize(
    ("mode", "budget", "ceiling"),
    [
        ("full", 100, 64 * 1024),
        ("digest", 100, 64 * 1024),
        ("full", 2000, 256 * 1024),  # the first note is shown cut: a range of its blob
        ("fields", 2000, 256 * 1024),
    ],
)
def test_a_small_budget_over_fifty_notes_of_a_mebibyte_fetches_kilobytes(
    fifty_big_notes: tuple[httpx.Client, list[str]],
    gateway: GatewayProcess,
    redis_server: EmbeddedRedis,
    mode: str,
    budget: int,
    ceiling: int,
) -> None:
    http, uris = fifty_big_notes
    args: dict[str, Any] = {"uris": uris, "mode": mode, "budget_tokens": budget}
    if mode == "fields":
        args["fields"] = ["body", "size"]
    before = _sent_by_redis(redis_server)
    result = _call(http, gateway, "get_state", **args)
    sent = _sent_by_redis(redis_server) - before
    body = result["structuredContent"]
    assert not result["isError"], body
    assert sent < ceiling, f"Redis sent {sent} bytes for one read at budget {budget}"
    assert body["spent_tokens"] <= budget
    assert body["omitted"] >= 49
    if budget == 2000 and mode == "full":
        [item] = body["items"]
        assert item["body"].startswith("Note 0. Replica lag")
        assert item["cut"]["shown_tokens"] < item["cut"]["total_tokens"]
