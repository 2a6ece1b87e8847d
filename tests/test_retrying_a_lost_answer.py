"""An agent whose write's answer was lost (a timeout, a cut connection) retries it with the
same expect_version: the conflict it gets says whether the write that landed is its own, with
the same content, so that it neither writes twice nor gives up on a write that landed.

``yours: true`` only when the current version is exactly the one the retried write would have
made: one past the expected version, by the same author, with the same digest, kind and
content (columns and cells for a table). Anything else is an ordinary conflict.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from app_support import InProcessGateway, in_process_gateway
from support import agent_token

from blackboard_mcp.auth import TokenIssuer


@pytest.fixture
async def gateway(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    async with in_process_gateway(redis_url, tmp_path) as running:
        yield running


async def write_twice(
    gateway: InProcessGateway, token: str, **arguments: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The write, then the same write again as a retry would send it."""
    first = await gateway.ok(token, "update_state", **arguments)
    is_error, retried = await gateway.call(token, "update_state", **arguments)
    assert is_error, retried
    return first, retried["error"]


async def test_a_retried_write_that_landed_is_a_conflict_that_says_it_is_yours(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="planner")
    uri = f"bb://{workspace}/plans/q3"
    await gateway.ok(token, "update_state", uri=uri, digest="draft", body="v1", expect_version=0)
    first, conflict = await write_twice(
        gateway, token, uri=uri, digest="final", body="the plan", expect_version=1
    )
    assert first["version"] == 2
    assert conflict["code"] == "conflict" and conflict["current_version"] == 2
    assert conflict["yours"] is True
    assert "yours" in conflict["hint"] or "your" in conflict["message"], conflict


async def test_a_first_write_retried_with_expect_version_zero_is_yours(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="planner")
    _, conflict = await write_twice(
        gateway, token, uri=f"bb://{workspace}/plans/new", digest="d", body="b", expect_version=0
    )
    assert conflict["current_version"] == 1 and conflict["yours"] is True


@pytest.mark.parametrize(
    "content",
    [
        {"body": "x" * 40_000},  # offloaded: compared by its hash
        {"columns": ["task", "owner"], "rows": [["ship", "ana"], ["test", "bo"]]},
    ],
    ids=["offloaded body", "table"],
)
async def test_yours_holds_for_offloaded_bodies_and_tables(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, content: dict[str, Any]
) -> None:
    token = agent_token(issuer, workspace, sub="planner")
    uri = f"bb://{workspace}/plans/big"
    _, conflict = await write_twice(
        gateway, token, uri=uri, digest="d", expect_version=0, **content
    )
    assert conflict["yours"] is True


async def test_the_same_content_by_another_author_is_not_yours(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    planner = agent_token(issuer, workspace, sub="planner")
    other = agent_token(issuer, workspace, sub="reviewer")
    uri = f"bb://{workspace}/plans/q3"
    same = {"uri": uri, "digest": "d", "body": "b", "expect_version": 0}
    await gateway.ok(other, "update_state", **same)
    is_error, answer = await gateway.call(planner, "update_state", **same)
    assert is_error and "yours" not in answer["error"], answer


@pytest.mark.parametrize(
    "change",
    [{"body": "other text"}, {"digest": "other digest"}],
    ids=["another body", "another digest"],
)
async def test_another_content_by_the_same_author_is_not_yours(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, change: dict[str, str]
) -> None:
    token = agent_token(issuer, workspace, sub="planner")
    uri = f"bb://{workspace}/plans/q3"
    await gateway.ok(token, "update_state", uri=uri, digest="d", body="b", expect_version=0)
    retry = {"uri": uri, "digest": "d", "body": "b", "expect_version": 0, **change}
    is_error, answer = await gateway.call(token, "update_state", **retry)
    assert is_error and "yours" not in answer["error"], answer


async def test_a_write_that_landed_and_was_then_overwritten_is_not_yours(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    planner = agent_token(issuer, workspace, sub="planner")
    other = agent_token(issuer, workspace, sub="reviewer")
    uri = f"bb://{workspace}/plans/q3"
    mine = {"uri": uri, "digest": "d", "body": "b", "expect_version": 0}
    await gateway.ok(planner, "update_state", **mine)
    await gateway.ok(other, "update_state", uri=uri, digest="d2", body="b2", expect_version=1)
    is_error, answer = await gateway.call(planner, "update_state", **mine)
    assert is_error and answer["error"]["current_version"] == 2
    assert "yours" not in answer["error"], answer
