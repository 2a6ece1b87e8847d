"""The admin API deletes nothing without ``confirm: true``: a delete, or a retention setting
that would expire notes, first answers how many would go and the first addresses. Its
bounds are those its OpenAPI description states. Through the gateway in process, on the
real Redis.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from app_support import InProcessGateway, in_process_gateway
from support import admin_token, agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store.connection._field_names import FIELD


@pytest.fixture
async def app(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    async with in_process_gateway(redis_url, tmp_path, rate_limit_per_minute=1_000_000) as gw:
        yield gw


async def post(app: InProcessGateway, token: str, path: str, body: Any) -> tuple[int, Any]:
    response = await app.http.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
    return response.status_code, response.json()


async def seed(app: InProcessGateway, issuer: TokenIssuer, workspace: str, count: int) -> None:
    agent = agent_token(issuer, workspace)
    for i in range(count):
        await app.ok(
            agent, "update_state", uri=f"bb://{workspace}/research/n{i}", digest="d", body="b"
        )


async def notes(app: InProcessGateway, issuer: TokenIssuer, workspace: str) -> int:
    listed = await app.ok(agent_token(issuer, workspace), "list_keys", topic="research")
    return len(listed["items"])


async def test_a_delete_without_confirm_only_says_what_would_go(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    await seed(app, issuer, workspace, 3)
    admin = admin_token(issuer, workspace)
    status, preview = await post(app, admin, "/admin/delete", {"topic": "research"})
    assert status == 200, preview
    assert (preview["applied"], preview["would_delete"]) == (False, 3)
    assert f"bb://{workspace}/research/n0" in preview["uris"]
    assert "confirm" in preview["hint"]
    assert await notes(app, issuer, workspace) == 3
    status, done = await post(app, admin, "/admin/delete", {"topic": "research", "confirm": True})
    assert status == 200 and done["deleted"] == 3, done
    assert await notes(app, issuer, workspace) == 0


async def age_notes(redis_url: str, workspace: str, count: int, days: int) -> None:
    """As if the notes had last been written ``days`` ago (the index follows the hash)."""
    import time

    import redis.asyncio as aioredis

    from blackboard_mcp.store.connection import _key_names as keys

    client = aioredis.Redis.from_url(redis_url)
    try:
        long_ago = int((time.time() - days * 86400) * 1000)
        for i in range(count):
            await client.hset(keys.note(workspace, f"research/n{i}"), FIELD.updated, long_ago)
    finally:
        await client.aclose()


async def test_a_retention_that_would_expire_notes_is_previewed_until_confirmed(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str, redis_url: str
) -> None:
    await seed(app, issuer, workspace, 2)
    admin = admin_token(issuer, workspace)
    body = {"topic": "research", "max_age_seconds": 86400}
    # The notes were written a moment ago: a second from now they are older than a second.
    status, preview = await post(app, admin, "/admin/retention", {**body, "max_age_seconds": 0})
    assert status == 200 and "applied" not in preview, preview  # 0 on a topic: keep forever
    status, answer = await post(app, admin, "/admin/retention", {**body, "max_age_seconds": 3600})
    assert status == 200 and answer["topics"] == {"research": 3600}, answer
    response = await app.http.get("/admin/retention", headers={"Authorization": f"Bearer {admin}"})
    assert response.json()["topics"] == {"research": 3600}
    # A maximum age shorter than the notes' is said first.
    await age_notes(redis_url, workspace, 2, days=3)
    status, preview = await post(app, admin, "/admin/retention", body)
    assert status == 200 and preview["applied"] is False and preview["would_delete"] == 2
    response = await app.http.get("/admin/retention", headers={"Authorization": f"Bearer {admin}"})
    assert response.json()["topics"] == {"research": 3600}
    status, answer = await post(app, admin, "/admin/retention", {**body, "confirm": True})
    assert status == 200 and answer["topics"] == {"research": 86400}, answer


@pytest.mark.parametrize("age", [2**70, 2**53 + 1, 100 * 365 * 86400 + 1, -1, 1.5, "60"])
async def test_a_maximum_age_beyond_the_stated_bound_is_refused(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str, age: object
) -> None:
    status, answer = await post(
        app, admin_token(issuer, workspace), "/admin/retention", {"max_age_seconds": age}
    )
    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_argument"


async def test_a_whole_number_written_with_a_fraction_is_the_number(
    app: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    status, answer = await post(
        app,
        admin_token(issuer, workspace),
        "/admin/retention",
        {"topic": "t", "max_age_seconds": 6617903.0},
    )
    assert status == 200, answer
    assert answer["topics"] == {"t": 6617903}
