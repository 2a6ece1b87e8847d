"""Retention: notes older than their maximum age since the last write are deleted by the
gateways, one sweeper at a time, audited; fresh notes and pinned topics are kept. Time is
made short by configuration (a sweep every 0.3 s, ages of a second or two)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from app_support import InProcessGateway, in_process_gateway
from lifecycle_support import on_redis, run_cli, tool, write
from store_support import sweep_as_the_sweeper
from support import GatewayProcess, admin_token, agent_token, start_gateway, stop_gateway

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import Board, EmbeddedRedis, GetState, UpdateState

SWEEP_SECONDS = 0.3
SWEEP = {"BB_RETENTION_SWEEP_SECONDS": str(SWEEP_SECONDS)}


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of this test's own: the sweeper's lease is one per board, and the session's
    gateway (sweeping once a minute) must not be the one holding it."""
    server = EmbeddedRedis(data_dir=tmp_path / "redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def gateways(own_redis: EmbeddedRedis, tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    started = [start_gateway(own_redis.url, tmp_path / f"gw{i}", extra_env=SWEEP) for i in range(2)]
    yield started
    for gateway in started:
        stop_gateway(gateway)


@pytest.fixture
async def sweeping_app(own_redis: EmbeddedRedis, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    """The gateway's app in process on this test's Redis, its sweeper running: for what a
    sweep does, where the processes that share the sweeper's lease are not the point."""
    async with in_process_gateway(
        own_redis.url, tmp_path / "app", retention_sweep_seconds=SWEEP_SECONDS
    ) as app:
        yield app


def sweeps(env: dict[str, str], workspace: str) -> list[dict[str, Any]]:
    tail = run_cli("audit", "tail", "--workspace", workspace, "--json", env=env)
    assert tail.returncode == 0, tail.stderr
    records = [json.loads(line) for line in tail.stdout.splitlines()]
    return [r for r in records if r["tool"] == "retention.sweep"]


async def wait_gone(
    gateway: str | InProcessGateway, token: str, uri: str, timeout: float = 10.0
) -> None:
    """Polls ``uri`` through a gateway process (its MCP URL) or the app in process."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if isinstance(gateway, InProcessGateway):
            read = await gateway.ok(token, "get_state", uris=[uri])
        else:
            read = await tool(gateway, token, "get_state", uris=[uri])
        if read["items"][0].get("error") == "not_found":
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{uri} was not swept within {timeout}s")


async def test_a_sweep_deletes_what_is_older_than_the_age_at_its_clock_and_keeps_the_rest(
    board: Board, redis_url: str
) -> None:
    ws = "clocked"

    def u(topic: str, path: str) -> str:
        return f"bb://{ws}/{topic}/{path}"

    async def server_ms() -> int:
        seconds, micros = await board.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    for uri in (u("runs", "old"), u("pinned", "keep")):
        await board.update_state(
            UpdateState.parse({"uri": uri, "digest": "d", "body": "x"}), author="agent-1"
        )
    # Notes carry the server's time in ms: the fresh note is written a millisecond later at
    # least (Redis's clock, polled a few times; no sleep).
    between = await server_ms()
    while await server_ms() == between:
        pass
    await board.update_state(
        UpdateState.parse({"uri": u("runs", "fresh"), "digest": "d", "body": "x"}), author="agent-1"
    )
    await board.set_retention(workspace=ws, max_age_seconds=3600)
    await board.set_retention(workspace=ws, topic="pinned", max_age_seconds=0)
    # At the server's own time nothing is an hour old.
    assert await sweep_as_the_sweeper(board, redis_url, owner="a") == []
    # An hour after `between`: "old" is past the age, "fresh" is not; "pinned" is kept.
    hour = 3_600_000
    swept = await sweep_as_the_sweeper(board, redis_url, owner="a", now_ms=between + hour + 1)
    assert [(s.workspace, s.topic, s.members) for s in swept or []] == [(ws, "runs", ["runs/old"])]
    # Two hours on, the fresh one goes too, and still not the pinned one.
    swept = await sweep_as_the_sweeper(board, redis_url, owner="a", now_ms=between + 2 * hour)
    assert [(s.workspace, s.topic, s.members) for s in swept or []] == [
        (ws, "runs", ["runs/fresh"])
    ]
    read = await board.get_state(
        GetState.parse({"uris": [u("pinned", "keep"), u("runs", "old")], "mode": "ref"})
    )
    assert [item.get("error") for item in read["items"]] == [None, "not_found"]
    # Another owner cannot sweep while the lease is held.
    assert await board.sweep_retention(owner="b", lease_seconds=5) is None


async def test_retention_deletes_old_notes_keeps_pinned_ones_and_one_process_sweeps(
    gateways: list[GatewayProcess],
    own_redis: EmbeddedRedis,
    issuer: TokenIssuer,
    tmp_path: Path,
) -> None:
    ws = "retained"
    token = agent_token(issuer, ws)
    url = gateways[0].mcp_url
    env = on_redis(tmp_path, own_redis.url)

    def u(topic: str, path: str) -> str:
        return f"bb://{ws}/{topic}/{path}"

    await write(url, token, uri=u("runs", "first"), digest="d", body="x")
    await write(url, token, uri=u("pinned", "keep"), digest="d", body="x")
    cursor = int((await tool(url, token, "list_keys", topic="runs"))["cursor"])
    # The topic's override first: the workspace's age alone would sweep it at once. With
    # --yes: on a busy machine "first" may be 2 s old already, and a setting that would delete
    # is only previewed without it.
    for args in (("--topic", "pinned", "--max-age", "forever"), ("--max-age", "2s")):
        result = run_cli("retention", "set", "--workspace", ws, *args, "--yes", env=env)
        assert result.returncode == 0, result.stderr
    shown = run_cli("retention", "show", "--workspace", ws, env=env)
    assert shown.stdout.splitlines() == [f"workspace {ws}: 2s", "  topic pinned: kept forever"]

    await write(url, token, uri=u("runs", "second"), digest="d", body="x")
    # Each waits up to a generous 60 s on a busy machine; which note goes first, and whether
    # both go in one sweep, depends on timing, so the assertions do not. That a fresh note is
    # kept while an old one goes is proven against an injected clock
    # (test_a_sweep_deletes_what_is_older_than_the_age_at_its_clock_and_keeps_the_rest).
    await wait_gone(url, token, u("runs", "first"), timeout=60)
    await wait_gone(url, token, u("runs", "second"), timeout=60)
    # "pinned" sorts before "runs": the sweep that took "second" looked at it after it aged.
    pinned = await tool(url, token, "get_state", uris=[u("pinned", "keep")])
    assert "error" not in pinned["items"][0]

    # Audited, by one sweeper while both processes run.
    records = sweeps(env, ws)
    assert {(r["subject"], tuple(r["addresses"])) for r in records} == {
        ("retention", (f"bb://{ws}/runs/",))
    }
    assert sum(int(r["outcome"].removeprefix("deleted ")) for r in records) == 2
    owners = {r["request_id"] for r in records}
    assert len(owners) == 1, owners
    # A reader following its cursor learns of both deletions.
    feed = await tool(url, token, "list_keys", topic="runs", cursor=cursor)
    assert any(u("runs", "first") in w and u("runs", "second") in w for w in feed["warnings"])

    # The sweeping process stops: the other takes over once the lease runs out.
    pid = int(owners.pop().split(":")[1])
    holder = next(g for g in gateways if g.process.pid == pid)
    stop_gateway(holder)
    survivor = next(g for g in gateways if g is not holder)
    await write(survivor.mcp_url, token, uri=u("runs", "third"), digest="d", body="x")
    await wait_gone(survivor.mcp_url, token, u("runs", "third"))
    last = sweeps(env, ws)[-1]
    assert int(last["request_id"].split(":")[1]) == survivor.process.pid


async def test_retention_refuses_an_age_without_a_unit_and_is_off_by_default(
    own_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    env = on_redis(tmp_path, own_redis.url)
    board = Board.from_url(own_redis.url)
    try:
        await board.update_state(
            UpdateState.parse({"uri": "bb://w/t/k", "digest": "d", "body": ""}), author="a"
        )
    finally:
        await board.close()
    shown = run_cli("retention", "show", "--workspace", "w", env=env)
    assert shown.stdout.splitlines() == ["workspace w: off"]
    refused = run_cli("retention", "set", "--workspace", "w", "--max-age", "30", env=env)
    assert refused.returncode == 2
    assert "add the unit" in refused.stderr


async def test_an_admin_sets_and_reads_retention_over_http(
    sweeping_app: InProcessGateway,
    issuer: TokenIssuer,
    own_redis: EmbeddedRedis,
    tmp_path: Path,
) -> None:
    http = sweeping_app.http
    admin = {"Authorization": f"Bearer {admin_token(issuer, 'httpws', sub='ops-bob')}"}
    answer = await http.post("/admin/retention", headers=admin, json={"max_age_seconds": 86400})
    assert answer.status_code == 200, answer.text
    answer = await http.post(
        "/admin/retention", headers=admin, json={"topic": "keep", "max_age_seconds": 0}
    )
    assert answer.json() == {"workspace": "httpws", "max_age_seconds": 86400, "topics": {"keep": 0}}
    assert (await http.get("/admin/retention", headers=admin)).json() == answer.json()
    bad = await http.post("/admin/retention", headers=admin, json={"max_age_seconds": "1d"})
    assert bad.status_code == 400 and bad.json()["error"]["hint"]
    agent = {"Authorization": f"Bearer {agent_token(issuer, 'httpws')}"}
    assert (await http.get("/admin/retention", headers=agent)).status_code == 403
    records = [
        r
        for r in map(
            json.loads,
            run_cli(
                "audit", "tail", "--workspace", "httpws", "--json",
                env=on_redis(tmp_path, own_redis.url),
            ).stdout.splitlines(),
        )
        if r["tool"] == "admin.retention"
    ]  # fmt: skip
    assert [(r["subject"], r["addresses"], r["outcome"]) for r in records] == [
        ("ops-bob", ["bb://httpws/"], "max age 86400s"),
        ("ops-bob", ["bb://httpws/keep/"], "max age 0s"),
    ]


async def test_imported_old_notes_behind_fresh_ones_are_swept_by_their_own_write_time(
    sweeping_app: InProcessGateway,
    own_redis: EmbeddedRedis,
    issuer: TokenIssuer,
    tmp_path: Path,
) -> None:
    ws, scratch = "imported", "scratch"
    token = agent_token(issuer, ws)
    env = on_redis(tmp_path, own_redis.url)
    await sweeping_app.ok(
        agent_token(issuer, scratch),
        "update_state",
        uri=f"bb://{scratch}/runs/n",
        digest="d",
        body="o",
    )
    exported = run_cli("export", "--workspace", scratch, env=env)
    assert exported.returncode == 0, exported.stderr
    header, note = (json.loads(line) for line in exported.stdout.splitlines())
    # More fresh notes than a sweep reads at a time, written (imported) before the old ones:
    # in the topic's write order every old note sits behind them.
    now = int(time.time() * 1000)
    ten_days_ago = now - 10 * 86400 * 1000
    fresh = [f"fresh-{i:03}" for i in range(120)]
    old = ["old-a", "old-b", "old-c"]
    lines = [header | {"notes": len(fresh) + len(old)}]
    for name, at in [*((n, now) for n in fresh), *((n, ten_days_ago) for n in old)]:
        lines.append(note | {"uri": f"bb://{scratch}/runs/{name}", "created": at, "updated": at})
    dump = tmp_path / "old.jsonl"
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines))
    imported = run_cli("import", str(dump), "--workspace", ws, env=env)
    assert imported.returncode == 0, imported.stderr

    assert (
        run_cli(
            "retention", "set", "--workspace", ws, "--max-age", "1d", "--yes", env=env
        ).returncode
        == 0
    )
    for name in old:
        await wait_gone(sweeping_app, token, f"bb://{ws}/runs/{name}")
    health = run_cli("health", env=env)
    assert json.loads(health.stdout)["notes"][ws] == len(fresh)  # every fresh note is kept
    assert [r["outcome"] for r in sweeps(env, ws)] == ["deleted 3"]


def test_forever_is_for_a_topic_and_off_turns_a_workspace_s_retention_off(
    own_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    # "forever" on a whole workspace read as "never delete" and silently turned retention off.
    env = on_redis(tmp_path, own_redis.url)
    refused = run_cli("retention", "set", "--workspace", "w", "--max-age", "forever", env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "--topic" in refused.stderr and "off" in refused.stderr
