"""Deleting data: a topic or a note goes whole (indexes, links at both ends, blobs, search
entries), others stay untouched, cursor readers are told, and the audit says who did it.

Through the real path: notes written over MCP to the gateway's app, deleted by the real CLI
(or the admin API), read back over MCP.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from app_support import InProcessGateway
from lifecycle_support import on_redis, run_cli
from support import admin_token, agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import Board, EmbeddedRedis, LinkState, UpdateState, board_client
from blackboard_mcp.store.connection._field_names import FIELD

BIG = "big body line\n" * 1500  # over the 10 KB offload threshold: a blob
ALONE = "alone body line\n" * 1500


def keys_of(url: str, workspace: str, pattern: str) -> list[bytes]:
    client = redis.Redis.from_url(url)
    try:
        return sorted(client.scan_iter(match=f"*{{{workspace}}}:{pattern}", count=1000))
    finally:
        client.close()


def blob_exists(url: str, workspace: str, text: str) -> bool:
    client = redis.Redis.from_url(url)
    try:
        digest = hashlib.sha256(text.encode()).hexdigest()
        return bool(client.exists(f"bbb:{{{workspace}}}:{digest}"))
    finally:
        client.close()


async def seed(gateway: InProcessGateway, token: str, ws: str) -> int:
    """Two topics linked both ways, sharing one blob; returns a cursor taken before any delete."""

    def u(path: str) -> str:
        return f"bb://{ws}/{path}"

    async def write(**arguments: Any) -> None:
        await gateway.ok(token, "update_state", **arguments)

    async def link(src: str, rel: str, dst: str) -> None:
        await gateway.ok(token, "link_state", src=u(src), rel=rel, dst=[u(dst)])

    await write(uri=u("doomed/plan"), digest="zebra plan", body="p", expect_version=0)
    await write(uri=u("doomed/big"), digest="zebra big", body=BIG, expect_version=0)
    await write(uri=u("doomed/alone"), digest="zebra alone", body=ALONE)
    await write(uri=u("doomed/grid"), digest="zebra grid", columns=["a"], rows=[["1"]])
    await write(uri=u("kept/note"), digest="zebra kept", body="k", expect_version=0)
    await write(uri=u("kept/shared"), digest="zebra shared", body=BIG)
    await link("kept/note", "cites", "doomed/plan")
    await link("doomed/plan", "derived_from", "kept/note")
    await link("kept/shared", "contradicts", "doomed/big")
    listing = await gateway.ok(token, "list_keys", topic="kept")
    return int(listing["cursor"])


@pytest.fixture
def token(issuer: TokenIssuer, workspace: str) -> str:
    return agent_token(issuer, workspace)


@pytest.fixture
def env(tmp_path: Path, redis_url: str) -> dict[str, str]:
    """The CLI's environment, on the Redis the gateway's app uses."""
    return on_redis(tmp_path, redis_url)


@pytest.fixture
async def cursor(app_gateway: InProcessGateway, token: str, workspace: str) -> int:
    """The workspace seeded (``seed``); the cursor taken before any delete."""
    return await seed(app_gateway, token, workspace)


async def test_deleting_a_topic_removes_it_whole_and_leaves_the_others_untouched(
    app_gateway: InProcessGateway,
    redis_url: str,
    issuer: TokenIssuer,
    workspace: str,
    token: str,
    cursor: int,
    env: dict[str, str],
) -> None:
    before = await app_gateway.ok(
        token, "get_state", uris=[f"bb://{workspace}/kept/note"], mode="full"
    )

    dry = run_cli("delete", "--workspace", workspace, "--topic", "doomed", env=env)
    assert dry.returncode == 1, dry.stdout + dry.stderr  # a preview: nothing done
    assert "would delete 4 notes" in dry.stdout
    assert f"bb://{workspace}/doomed/big" in dry.stdout
    assert "--yes" in dry.stderr
    still = await app_gateway.ok(token, "list_keys", topic="doomed")
    assert len(still["items"]) == 4

    done = run_cli("delete", "--workspace", workspace, "--topic", "doomed", "--yes", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deleted 4 notes" in done.stdout

    # Gone from reads, listings and search.
    doomed = [f"bb://{workspace}/doomed/{p}" for p in ("plan", "big", "alone", "grid")]
    read = await app_gateway.ok(token, "get_state", uris=doomed, mode="full")
    assert all(item.get("error") == "not_found" for item in read["items"]), read
    assert (await app_gateway.ok(token, "list_keys", topic="doomed"))["items"] == []
    everything = await app_gateway.ok(token, "list_keys", limit=50)
    assert {i["uri"].split("/")[3] for i in everything["items"]} == {"kept"}
    found = await app_gateway.ok(token, "search_keys", q="zebra")
    assert sorted(r["uri"] for r in found["items"]) == [
        f"bb://{workspace}/kept/note",
        f"bb://{workspace}/kept/shared",
    ]
    # The other side's view of the links is gone too; the rest of the note is as it was.
    after = await app_gateway.ok(
        token, "get_state", uris=[f"bb://{workspace}/kept/note"], mode="full"
    )
    assert "links" not in after["items"][0] or after["items"][0]["links"] == []
    assert {k: v for k, v in after["items"][0].items() if k != "links"} == {
        k: v for k, v in before["items"][0].items() if k != "links"
    }
    shared = await app_gateway.ok(
        token,
        "get_state",
        uris=[f"bb://{workspace}/kept/shared"],
        mode="full",
        budget_tokens=100_000,
    )
    assert not shared["items"][0].get("warnings"), shared  # no longer "contradicts" anything
    assert shared["items"][0]["body"] == BIG
    # A blob only the deleted topic used is freed; one another note uses stays.
    assert not blob_exists(redis_url, workspace, ALONE)
    assert blob_exists(redis_url, workspace, BIG)
    assert keys_of(redis_url, workspace, "doomed*") == []

    # A reader following its cursor is told what went.
    feed = await app_gateway.ok(token, "list_keys", cursor=cursor)
    notices = [w for w in feed.get("warnings", []) if w.startswith("deleted since your cursor")]
    assert len(notices) == 1, feed
    assert all(uri in notices[0] for uri in doomed[:4]), notices
    # A reader who may not read the topic is not told of its notes.
    blind = agent_token(issuer, workspace, read=["kept"], sub="blind")
    feed = await app_gateway.ok(blind, "list_keys", cursor=cursor, topic="kept")
    assert not any("deleted" in w for w in feed.get("warnings", [])), feed

    # The audit says who did what.
    tail = run_cli("audit", "tail", "--workspace", workspace, "--json", env=env)
    assert tail.returncode == 0, tail.stderr
    records = [json.loads(line) for line in tail.stdout.splitlines()]
    deletes = [r for r in records if r["tool"] == "cli.delete"]
    assert len(deletes) == 1, records
    assert deletes[0]["subject"].startswith("cli:")
    assert deletes[0]["addresses"] == [f"bb://{workspace}/doomed/"]
    assert deletes[0]["outcome"] == "deleted 4"


@pytest.mark.usefixtures("cursor")
async def test_deleting_one_note_by_uri_and_a_missing_one_is_not_found(
    app_gateway: InProcessGateway, workspace: str, token: str, env: dict[str, str]
) -> None:
    uri = f"bb://{workspace}/doomed/plan"
    done = run_cli("delete", "--workspace", workspace, "--uri", uri, "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert "deleted 1 note under" in done.stdout
    left = await app_gateway.ok(token, "list_keys", topic="doomed")
    assert len(left["items"]) == 3
    again = run_cli("delete", "--workspace", workspace, "--uri", uri, "--yes", env=env)
    assert again.returncode == 1
    assert f"no note {uri}" in again.stderr
    assert "Traceback" not in again.stderr
    # A --workspace that disagrees with the address is a usage error: nothing is asked of Redis.
    elsewhere = run_cli("delete", "--workspace", "other", "--uri", uri, "--yes", env=env)
    assert elsewhere.returncode == 2
    assert "not 'other'" in elsewhere.stderr


@pytest.mark.usefixtures("cursor")
async def test_deleting_a_workspace_removes_every_note_of_it(
    app_gateway: InProcessGateway,
    redis_url: str,
    workspace: str,
    token: str,
    env: dict[str, str],
) -> None:
    done = run_cli("delete", "--workspace", workspace, "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert "deleted 6 notes" in done.stdout
    listing = await app_gateway.ok(token, "list_keys", limit=50)
    assert listing["items"] == []
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.hlen(f"bbr:{{{workspace}}}") == 0  # no blob is referenced any more
        assert not client.exists(f"bbw:{{{workspace}}}")
    finally:
        client.close()
    note_kinds = {b"bbn", b"bbb", b"bblo", b"bbli", b"bbt", b"bbtk", b"bbtn", b"bbtv"}
    left = [k for k in keys_of(redis_url, workspace, "*") if k.split(b":")[0] in note_kinds]
    assert left == []


def health_notes(env: dict[str, str]) -> dict[str, int]:
    done = run_cli("health", env=env)
    assert done.returncode == 0, done.stderr
    notes: dict[str, int] = json.loads(done.stdout)["notes"]
    return notes


async def test_a_deleted_workspace_is_gone_but_its_audit_and_revocations_outlive_it(
    app_gateway: InProcessGateway,
    issuer: TokenIssuer,
    workspace: str,
    token: str,
    env: dict[str, str],
) -> None:
    await app_gateway.ok(token, "update_state", uri=f"bb://{workspace}/t/n", digest="d", body="b")
    set_age = run_cli("retention", "set", "--workspace", workspace, "--max-age", "7d", env=env)
    assert set_age.returncode == 0, set_age.stderr
    leaked = agent_token(issuer, workspace, sub="leaky")
    assert run_cli("token", "revoke", "--token", leaked, env=env).returncode == 0
    assert workspace in health_notes(env)

    done = run_cli("delete", "--workspace", workspace, "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert workspace not in health_notes(env)
    shown = run_cli("retention", "show", "--workspace", workspace, env=env)
    assert shown.returncode == 1 and f"no workspace {workspace!r}" in shown.stderr  # gone whole
    tail = run_cli("audit", "tail", "--workspace", workspace, "--json", env=env)
    assert tail.returncode == 0, tail.stderr
    tools = [json.loads(line)["tool"] for line in tail.stdout.splitlines()]
    assert "cli.delete" in tools, tools  # the audit trail outlives the workspace

    # Written again, the workspace is back, and the token revoked before the delete is not.
    await app_gateway.ok(
        token, "update_state", uri=f"bb://{workspace}/t/again", digest="d", body="b"
    )
    assert health_notes(env)[workspace] == 1
    inspected = run_cli("token", "inspect", leaked, env=env)
    assert inspected.returncode == 1, inspected.stdout
    assert json.loads(inspected.stdout)["revocation"] == "revoked"


# -- over HTTP -------------------------------------------------------------------------------


async def post(gateway: InProcessGateway, token: str, body: object) -> httpx.Response:
    return await gateway.http.post(
        "/admin/delete", headers={"Authorization": f"Bearer {token}"}, json=body
    )


@pytest.mark.usefixtures("cursor")
async def test_an_admin_deletes_over_http_within_its_own_workspace_only(
    app_gateway: InProcessGateway,
    issuer: TokenIssuer,
    workspace: str,
    token: str,
    env: dict[str, str],
) -> None:
    admin = admin_token(issuer, workspace, sub="ops-alice")

    answer = await post(app_gateway, agent_token(issuer, workspace), {"topic": "doomed"})
    assert answer.status_code == 403, answer.text
    answer = await post(app_gateway, admin, {"topic": "doomed", "dry_run": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["would_delete"] == 4
    answer = await post(
        app_gateway, admin, {"topic": "doomed", "uri": f"bb://{workspace}/kept/note"}
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["hint"]
    answer = await post(app_gateway, admin, {})
    assert answer.status_code == 400
    # Another workspace's admin deletes in its own workspace, never in this one.
    stranger = admin_token(issuer, workspace + "-x")
    answer = await post(
        app_gateway, stranger, {"uri": f"bb://{workspace}/kept/note", "confirm": True}
    )
    assert answer.status_code == 403, answer.text
    assert (await app_gateway.ok(token, "list_keys", topic="kept"))["items"]

    answer = await post(app_gateway, admin, {"topic": "doomed"})
    assert answer.status_code == 200, answer.text
    assert (answer.json()["applied"], answer.json()["would_delete"]) == (False, 4)
    answer = await post(app_gateway, admin, {"topic": "doomed", "confirm": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["deleted"] == 4
    assert (await app_gateway.ok(token, "list_keys", topic="doomed"))["items"] == []
    tail = run_cli(
        "audit",
        "tail",
        "--workspace",
        workspace,
        "--json",
        env=env,
    )
    records = [json.loads(line) for line in tail.stdout.splitlines()]
    assert [(r["subject"], r["tool"], r["outcome"]) for r in records if "delete" in r["tool"]] == [
        ("ops-alice", "admin.delete", "deleted 4")
    ]


# -- concurrency -----------------------------------------------------------------------------


def assert_consistent(url: str, workspace: str) -> None:
    """Every note is whole or absent: indexes, links and blob counts agree with the notes."""
    client = redis.Redis.from_url(url)
    try:
        notes = {
            k.decode().split(":", 2)[2]
            for k in client.scan_iter(match=f"bbn:{{{workspace}}}:*", count=1000)
        }
        listed = set()
        for topic in client.smembers(f"bbw:{{{workspace}}}"):
            t = topic.decode()
            for index in ("bbt", "bbtn", "bbtv"):
                paths = {p.decode() for p in client.zrange(f"{index}:{{{workspace}}}:{t}", 0, -1)}
                listed |= {f"{t}/{p}" for p in paths}
                assert {f"{t}/{p}" for p in paths} <= notes, (index, t, paths - notes)
        assert listed == notes
        refs: dict[str, int] = {}
        for member in notes:
            note = client.hgetall(f"bbn:{{{workspace}}}:{member}")
            assert note.get(FIELD.version.encode()), member  # no half-written note
            blob = note.get(FIELD.blob.encode(), b"").decode()
            if blob:
                refs[blob] = refs.get(blob, 0) + 1
                assert client.exists(f"bbb:{{{workspace}}}:{blob}")
            for direction, other in (("bblo", "bbli"), ("bbli", "bblo")):
                for link in client.smembers(f"{direction}:{{{workspace}}}:{member}"):
                    rel, target = link.decode().split("\t", 1)
                    assert target in notes, (member, target)
                    assert f"{rel}\t{member}".encode() in client.smembers(
                        f"{other}:{{{workspace}}}:{target}"
                    )
        # Kept versions belong to notes that exist, and each holds a reference to its blob.
        kept_sets = {
            k.decode().split(":", 2)[2]
            for k in client.scan_iter(match=f"bbhv:{{{workspace}}}:*", count=1000)
        }
        assert kept_sets <= notes, kept_sets - notes
        kept = {
            k.decode().split(":", 2)[2]
            for k in client.scan_iter(match=f"bbh:{{{workspace}}}:*", count=1000)
        }
        listed_kept = set()
        for member in kept_sets:
            for version in client.zrange(f"bbhv:{{{workspace}}}:{member}", 0, -1):
                listed_kept.add(f"{member}@{version.decode()}")
        assert kept == listed_kept, kept ^ listed_kept
        for name in kept:
            blob = (client.hget(f"bbh:{{{workspace}}}:{name}", FIELD.blob) or b"").decode()
            if blob:
                refs[blob] = refs.get(blob, 0) + 1
                assert client.exists(f"bbb:{{{workspace}}}:{blob}")
        stored = {k.decode(): int(v) for k, v in client.hgetall(f"bbr:{{{workspace}}}").items()}
        assert stored == refs
    finally:
        client.close()


@pytest.mark.parametrize("round_", range(3))
async def test_a_note_written_during_a_delete_is_deleted_whole_or_kept_whole(
    redis_url: str, round_: int
) -> None:
    ws = f"race{round_}"
    boards = [Board(client=board_client(redis_url)) for _ in range(4)]
    writer, linker, deleter, _ = boards
    try:
        for i in range(30):
            await writer.update_state(
                UpdateState.parse({"uri": f"bb://{ws}/t/n{i}", "digest": "d", "body": BIG}),
                author="w",
            )

        async def keep_writing() -> None:
            for i in range(60):
                await writer.update_state(
                    UpdateState.parse(
                        {"uri": f"bb://{ws}/t/n{i % 40}", "digest": "again", "body": BIG + str(i)}
                    ),
                    author="w",
                )

        async def keep_linking() -> None:
            for i in range(1, 40):
                try:
                    await linker.link_state(
                        LinkState.parse(
                            {"src": f"bb://{ws}/t/n{i}", "rel": "cites", "dst": [f"bb://{ws}/t/n0"]}
                        ),
                        author="l",
                    )
                except Exception as exc:  # a note deleted first: refused, nothing written
                    assert getattr(exc, "code", "") == "not_found", exc

        await asyncio.gather(
            keep_writing(),
            keep_linking(),
            deleter.delete(author="ops", workspace=ws, topic="t"),
        )
        assert_consistent(redis_url, ws)
    finally:
        for board in boards:
            await board.close()


@pytest.mark.parametrize(
    "uri",
    ["bb://{ws}/research/nope", "bb://other-{ws}/research/x"],
    ids=["missing note", "another workspace"],
)
def test_the_cli_names_a_missing_or_misplaced_note_without_blaming_redis(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str, uri: str
) -> None:
    result = run_cli(
        "delete", "--workspace", workspace, "--uri", uri.format(ws=workspace), "--yes",
        env=on_redis(tmp_path, redis_server.url),
    )  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 2, result.stderr
    assert "cannot reach Redis" not in result.stderr and "Traceback" not in result.stderr
