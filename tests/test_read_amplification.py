"""A read fetches from Redis only what its budget can show.

Fifty notes of 1 MiB each, read at a small budget through the gateway: the bytes Redis sends
(its own ``total_net_output_bytes`` counter) stay in the kilobytes, where reading every body
moved 50 MiB into the gateway process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from app_support import InProcessGateway, gateway_in_a_loop
from support import agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis

MIB = 1024 * 1024


@dataclass(frozen=True)
class BigBoard:
    """The gateway held open on its own loop for the module, with the notes written once."""

    runner: asyncio.Runner
    gateway: InProcessGateway
    token: str
    uris: list[str]

    def call(self, tool: str, **args: Any) -> dict[str, Any]:
        answer = self.runner.run(
            self.gateway.rpc(self.token, "tools/call", {"name": tool, "arguments": args})
        )
        result: dict[str, Any] = answer["result"]
        return result


@pytest.fixture(scope="module")
def fifty_big_notes(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory, issuer: TokenIssuer
) -> Iterator[BigBoard]:
    workspace = "ws-amplification"
    uris = [f"bb://{workspace}/big/n{i:02d}" for i in range(50)]
    workdir = tmp_path_factory.mktemp("amplification")
    with gateway_in_a_loop(redis_server.url, workdir) as (runner, gateway):
        board = BigBoard(runner, gateway, agent_token(issuer, workspace), uris)
        paragraph = "Replica lag grows with the write rate of the primary. " * 20 + "\n\n"
        for i, uri in enumerate(uris):
            # Each body differs (no shared blob) and is exactly 1 MiB.
            body = (f"Note {i}. " + paragraph * (MIB // len(paragraph) + 1))[:MIB]
            reply = board.call("update_state", uri=uri, digest=f"Big note {i}.", body=body)
            assert not reply["isError"], reply
        yield board


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
    fifty_big_notes: BigBoard,
    redis_server: EmbeddedRedis,
    mode: str,
    budget: int,
    ceiling: int,
) -> None:
    args: dict[str, Any] = {"uris": fifty_big_notes.uris, "mode": mode, "budget_tokens": budget}
    if mode == "fields":
        args["fields"] = ["body", "size"]
    before = _sent_by_redis(redis_server)
    result = fifty_big_notes.call("get_state", **args)
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
