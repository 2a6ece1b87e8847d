"""One board on a Redis Cluster: a gateway given any one node serves every tool call."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cluster_support import migrate_slot
from support import (
    TEST_JWT_SECRET,
    GatewayProcess,
    agent_token,
    call,
    mcp_client,
    start_gateway,
    stop_gateway,
)

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import (
    Board,
    BoardLimits,
    GetState,
    LinkState,
    ListKeys,
    Unconfirmed,
    UpdateState,
)
from blackboard_mcp.store.connection._field_names import LONG_NAMES
from blackboard_mcp.store.connection._key_names import INDEX_NAME, digest_index
from blackboard_mcp.testing import LocalCluster


@pytest.fixture(scope="module")
def cluster_gateway(
    redis_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    # Given the last node, a replica: any node of the cluster will do.
    process = start_gateway(
        redis_cluster.nodes[-1].url,
        tmp_path_factory.mktemp("cluster-gw"),
        # Retention is swept every second, so a test sees it act.
        extra_env={"BB_RETENTION_SWEEP_SECONDS": "1"},
    )
    yield process
    stop_gateway(process)


async def test_a_gateway_given_one_node_writes_reads_links_and_searches_across_the_cluster(
    cluster_gateway: GatewayProcess, redis_cluster: LocalCluster, issuer: TokenIssuer
) -> None:
    # Enough workspaces that every primary owns some of them.
    workspaces = [f"cl-{i}" for i in range(12)]
    assert len({redis_cluster.owner_of(f"{{{ws}}}").port for ws in workspaces}) == 3
    for ws in workspaces:
        async with mcp_client(cluster_gateway.mcp_url, agent_token(issuer, ws)) as client:
            err, body = await call(
                client,
                "update_state",
                uri=f"bb://{ws}/plan/a",
                digest=f"Kafka rollout plan of {ws}",
                body="consumer lag",
                expect_version=0,
            )
            assert not err, body
            err, body = await call(
                client, "update_state", uri=f"bb://{ws}/plan/b", digest="Another", body="x"
            )
            assert not err, body
            err, body = await call(
                client,
                "link_state",
                src=f"bb://{ws}/plan/b",
                rel="depends_on",
                dst=[f"bb://{ws}/plan/a"],
            )
            assert not err, body
            err, body = await call(client, "get_state", uris=[f"bb://{ws}/plan/a"], mode="full")
            assert not err, body
            assert body["items"][0]["body"] == "consumer lag"
            err, body = await call(client, "list_keys", topic="plan")
            assert not err, body
            assert {i["uri"] for i in body["items"]} == {f"bb://{ws}/plan/a", f"bb://{ws}/plan/b"}
            err, body = await call(client, "search_keys", q="kafka")
            assert not err, body
            # Only this workspace's note, though every workspace has one that matches.
            assert [i["uri"] for i in body["items"]] == [f"bb://{ws}/plan/a"]


def _slot_errors(cluster: LocalCluster) -> dict[int, dict[str, str]]:
    """Per node, the redirections and cross-slot refusals it has answered since its reset."""
    out = {}
    for node in cluster.live():
        stats = node.info("errorstats")
        out[node.port] = {
            k: v for k, v in stats.items() if k in ("errorstat_CROSSSLOT", "errorstat_MOVED")
        }
    return out


def _cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BB_REDIS_URL": cluster.nodes[1].url, "BB_JWT_SECRET": TEST_JWT_SECRET}
    return subprocess.run(
        [sys.executable, "-m", "blackboard_mcp.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_every_command_of_every_tool_and_of_the_cli_stays_in_its_workspace_slot(
    cluster_gateway: GatewayProcess, redis_cluster: LocalCluster, issuer: TokenIssuer
) -> None:
    """The cluster counts CROSSSLOT and MOVED answers per node: none may come from a call.

    A key outside the workspace's slot sent with the workspace's keys would be refused with
    CROSSSLOT (same node) or MOVED (another node): the write's transaction, the admission
    script (revocations and the rate limit), reads, search and the audit stream run here,
    after one warm-up call, then `token revoke` and `audit tail`.
    """
    ws = "slots-" + uuid.uuid4().hex[:8]
    token = agent_token(issuer, ws)
    async with mcp_client(cluster_gateway.mcp_url, token) as client:
        err, body = await call(client, "list_keys")
        assert not err, body
        for node in redis_cluster.live():
            node.command("CONFIG", "RESETSTAT")
        big = "lorem ipsum " * 2000  # offloaded to a blob: another key of the workspace
        for args in (
            {"uri": f"bb://{ws}/t/a", "digest": "alpha kafka", "body": big, "expect_version": 0},
            {
                "uri": f"bb://{ws}/t/a",
                "digest": "alpha kafka",
                "body": "small",
                "expect_version": 1,
            },
            {"uri": f"bb://{ws}/t/b", "digest": "beta", "append": "one"},
            {"uri": f"bb://{ws}/t/b", "digest": "beta", "append": " two"},
            {"uri": f"bb://{ws}/u/c", "digest": "table", "columns": ["k"], "rows": [["v"]]},
        ):
            err, body = await call(client, "update_state", **args)
            assert not err, body
        err, body = await call(
            client, "update_state", uri=f"bb://{ws}/t/a", digest="x", body="y", expect_version=1
        )
        assert err and body["error"]["code"] == "conflict"
        err, body = await call(
            client,
            "link_state",
            src=f"bb://{ws}/t/b",
            rel="supersedes",
            dst=[f"bb://{ws}/t/a", f"bb://{ws}/u/c"],
        )
        assert not err, body
        err, body = await call(
            client,
            "get_state",
            uris=[f"bb://{ws}/t/a", f"bb://{ws}/t/b", f"bb://{ws}/u/c"],
            mode="full",
        )
        assert not err, body
        for order in ("recent", "name", "version"):
            err, body = await call(client, "list_keys", topic="t", order=order, limit=1)
            assert not err, body
        err, body = await call(client, "list_keys", kind="table")
        assert not err, body
        err, body = await call(client, "search_keys", q="kafka", topic="t")
        assert not err and [i["uri"] for i in body["items"]] == [f"bb://{ws}/t/a"], body
    assert _slot_errors(redis_cluster) == {n.port: {} for n in redis_cluster.live()}
    # The token above was made with the key, not issued through the board: forced. One the
    # board issues is on record, on the workspace's node, and listed.
    revoked = _cli(
        redis_cluster, "token", "revoke", "--workspace", ws, "--sub", "agent-1", "--force"
    )
    assert revoked.returncode == 0, revoked.stderr
    issued = _cli(
        redis_cluster, "token", "issue", "--workspace", ws, "--sub", "agent-2", "--read", "t",
        "--cap", "board_read",
    )  # fmt: skip
    assert issued.returncode == 0, issued.stderr
    listed = _cli(redis_cluster, "token", "list", "--workspace", ws, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(t["sub"], t["status"]) for t in json.loads(listed.stdout)] == [("agent-2", "active")]
    async with mcp_client(cluster_gateway.mcp_url, token) as client:
        err, body = await call(client, "list_keys")
        assert err and body["error"]["code"] == "unauthenticated", body
    tail = _cli(redis_cluster, "audit", "tail", "--workspace", ws)
    assert tail.returncode == 0, tail.stderr
    assert "update_state" in tail.stdout
    # A new CLI process's cluster client may be redirected once while it learns the slot
    # map; a command that crossed slots would be refused outright.
    assert not any("errorstat_CROSSSLOT" in e for e in _slot_errors(redis_cluster).values())


async def test_health_readiness_and_metrics_cover_every_node_of_the_cluster(
    cluster_gateway: GatewayProcess, redis_cluster: LocalCluster
) -> None:
    assert httpx.get(cluster_gateway.url + "/readyz", timeout=10).status_code == 200
    metrics = httpx.get(cluster_gateway.url + "/metrics", timeout=10).text
    for node in redis_cluster.nodes:
        role = "primary" if node.role() == "master" else "replica"
        assert f'bb_redis_node_up{{node="127.0.0.1:{node.port}",role="{role}"}} 1.0' in metrics
        if role == "primary":
            assert f'bb_redis_node_index_ready{{node="127.0.0.1:{node.port}"}} 1.0' in metrics
    health = _cli(redis_cluster, "health")
    assert health.returncode == 0, health.stdout + health.stderr
    report = json.loads(health.stdout)
    assert report["cluster"] is True and report["index"] == "ready"
    assert sorted(n["node"] for n in report["nodes"]) == sorted(
        f"127.0.0.1:{n.port}" for n in redis_cluster.nodes
    )
    assert all(n["redis"] == "ok" for n in report["nodes"])
    assert {n["role"] for n in report["nodes"]} == {"primary", "replica"}


async def test_a_workspace_whose_slot_moves_to_another_primary_stays_searchable_and_writable(
    cluster_gateway: GatewayProcess, redis_cluster: LocalCluster, issuer: TokenIssuer
) -> None:
    index_tag_slots = {redis_cluster.slot_of(str(i)) for i in range(50)}
    ws = next(
        w
        for w in (f"rs-{uuid.uuid4().hex[:8]}" for _ in range(100))
        if redis_cluster.slot_of(f"{{{w}}}") not in index_tag_slots
    )
    slot = redis_cluster.slot_of(f"{{{ws}}}")
    async with mcp_client(cluster_gateway.mcp_url, agent_token(issuer, ws)) as client:
        for i in range(5):
            err, body = await call(
                client,
                "update_state",
                uri=f"bb://{ws}/t/n{i}",
                digest=f"zebra {i}",
                body="b" * (20_000 if i == 0 else 10),  # one offloaded body: a blob key moves too
                expect_version=0,
            )
            assert not err, body
        source = redis_cluster.owner_of(f"{{{ws}}}")
        target = next(n for n in redis_cluster.primary_nodes() if n.port != source.port)
        assert migrate_slot(redis_cluster, slot, target) > 5
        assert redis_cluster.owner_of(f"{{{ws}}}").port == target.port

        err, body = await call(client, "search_keys", q="zebra", limit=10)
        assert not err, body
        assert sorted(i["uri"] for i in body["items"]) == [f"bb://{ws}/t/n{i}" for i in range(5)]
        err, body = await call(
            client,
            "update_state",
            uri=f"bb://{ws}/t/n0",
            digest="zebra moved",
            body="c",
            expect_version=1,
        )
        assert not err and body["version"] == 2, body
        err, body = await call(client, "get_state", uris=[f"bb://{ws}/t/n0"], mode="full")
        assert not err and body["items"][0]["body"] == "c", body
        err, body = await call(client, "list_keys", topic="t")
        assert not err and len(body["items"]) == 5, body
    # Nothing of the workspace is left behind on its old primary.
    assert int(source.command("CLUSTER", "COUNTKEYSINSLOT", slot)) == 0  # type: ignore[call-overload]


async def test_gateways_starting_at_once_leave_one_index_per_primary(
    redis_cluster: LocalCluster,
) -> None:
    """Every primary's index dropped, then four boards start together: one index each, built."""
    for node in redis_cluster.primary_nodes():
        for name in node.command("FT._LIST"):  # type: ignore[union-attr]
            node.command("FT.DROPINDEX", name)
    boards = [Board.from_url(redis_cluster.url) for _ in range(4)]
    try:
        await asyncio.gather(*(board.start() for board in boards))
        for node in redis_cluster.primary_nodes():
            names = node.command("FT._LIST")
            assert isinstance(names, list) and len(names) == 2, (node.port, names)
            # Named for a slot this very primary owns, so FT.SEARCH is not redirected; the
            # digests index beside it carries the same hash tag.
            notes_index = next(n.decode() for n in names if n.startswith(INDEX_NAME.encode()))
            assert {n.decode() for n in names} == {notes_index, digest_index(notes_index)}
            tag = notes_index.split("{", 1)[1].rstrip("}")
            assert redis_cluster.owner_of(tag).port == node.port
        # Ready once each new index has scanned the notes already on its primary.
        deadline = time.monotonic() + 20
        while not all([await board.ready() for board in boards]):
            assert time.monotonic() < deadline, "indexes never finished building"
            await asyncio.sleep(0.05)
    finally:
        for board in boards:
            await board.close()


async def test_a_primary_s_index_of_the_previous_version_is_dropped_when_a_board_starts(
    redis_cluster: LocalCluster,
) -> None:
    """Each primary's earlier index (its name with the primary's hash tag) goes; notes stay."""
    board = Board.from_url(redis_cluster.url)
    try:
        await board.start()
        current = {}
        for node in redis_cluster.primary_nodes():
            names = {n.decode() for n in node.command("FT._LIST")}  # type: ignore[union-attr]
            notes_index = next(n for n in names if n.startswith(INDEX_NAME))
            current[node.port] = names
            old = "bb-notes-v2" + notes_index.removeprefix(INDEX_NAME)
            node.command(
                "FT.CREATE", old, "ON", "HASH", "PREFIX", "1", "bbn:", "NOOFFSETS",
                "SCHEMA", "ws", "TAG", "digest", "TEXT", "WEIGHT", "5.0", "body", "TEXT",
            )  # fmt: skip
        await board.start()
        for node in redis_cluster.primary_nodes():
            names = {n.decode() for n in node.command("FT._LIST")}  # type: ignore[union-attr]
            assert names == current[node.port], (node.port, names)
    finally:
        await board.close()


async def test_the_recency_sets_of_an_earlier_version_are_removed_on_every_primary_at_start(
    redis_cluster: LocalCluster,
) -> None:
    workspaces = [f"old-{i}-{uuid.uuid4().hex[:6]}" for i in range(9)]
    board = Board.from_url(redis_cluster.url)
    try:
        await board.start()
        for ws in workspaces:
            await board.update_state(
                UpdateState.parse({"uri": f"bb://{ws}/t/n", "digest": "d", "body": "b"}), author="a"
            )
            # What the earlier version kept beside the sets by kind.
            redis_cluster.owner_of(f"{{{ws}}}").command("ZADD", f"bbt:{{{ws}}}:t", 1, "n")
        assert len({redis_cluster.owner_of(f"{{{ws}}}").port for ws in workspaces}) > 1
        await board.start()
        for ws in workspaces:
            owner = redis_cluster.owner_of(f"{{{ws}}}")
            assert owner.command("EXISTS", f"bbt:{{{ws}}}:t") == 0, ws
            listed = await board.list_keys(ListKeys.parse({"order": "recent"}), workspace=ws)
            assert [i["uri"] for i in listed["items"]] == [f"bb://{ws}/t/n"]
    finally:
        await board.close()


async def test_notes_of_the_earlier_field_layout_are_converted_on_every_primary_at_start(
    redis_cluster: LocalCluster,
) -> None:
    workspaces = [f"lay-{i}-{uuid.uuid4().hex[:6]}" for i in range(9)]
    board = Board.from_url(redis_cluster.url)
    try:
        await board.start()
        for ws in workspaces:
            for version in (1, 2):
                await board.update_state(
                    UpdateState.parse(
                        {"uri": f"bb://{ws}/t/n", "digest": f"d{version}", "body": f"b{version}"}
                    ),
                    author="a",
                )
    finally:
        await board.close()
    assert len({redis_cluster.owner_of(f"{{{ws}}}").port for ws in workspaces}) > 1
    # Each note and its kept first version as the earlier layout stored them.
    for ws in workspaces:
        owner = redis_cluster.owner_of(f"{{{ws}}}")
        for key, uri in ((f"bbn:{{{ws}}}:t/n", f"bb://{ws}/t/n"), (f"bbh:{{{ws}}}:t/n@1", None)):
            pairs = owner.command("HGETALL", key)  # a dict: the node's client speaks RESP3
            assert isinstance(pairs, dict) and pairs, key
            earlier = [v for k, val in pairs.items() for v in (LONG_NAMES[k.decode()], val)]
            owner.command("DEL", key)
            owner.command("HSET", key, *earlier, *(("uri", uri) if uri else ()))
    redis_cluster.owner_of("bbfields").command("DEL", "bbfields")
    board = Board.from_url(redis_cluster.url)
    try:
        await board.start()
        for ws in workspaces:
            owner = redis_cluster.owner_of(f"{{{ws}}}")
            assert owner.command("HEXISTS", f"bbn:{{{ws}}}:t/n", "version") == 0, ws
            read = await board.get_state(
                GetState.parse({"uris": [f"bb://{ws}/t/n", f"bb://{ws}/t/n@1"], "mode": "full"})
            )
            assert [(i["version"], i["body"]) for i in read["items"]] == [(2, "b2"), (1, "b1")]
    finally:
        await board.close()


async def test_a_write_waits_for_replicas_and_one_they_did_not_confirm_is_unconfirmed(
    redis_cluster: LocalCluster,
) -> None:
    ws = "wait-" + uuid.uuid4().hex[:8]
    one = Board.from_url(redis_cluster.url, limits=BoardLimits(wait_replicas=1))
    # Each primary has a single replica: two can never confirm.
    two = Board.from_url(redis_cluster.url, limits=BoardLimits(wait_replicas=2, wait_timeout_ms=50))
    try:
        await one.start()
        await two.start()
        written = await one.update_state(
            UpdateState.parse(
                {"uri": f"bb://{ws}/t/a", "digest": "d", "body": "x", "expect_version": 0}
            ),
            author="a",
        )
        assert written["version"] == 1
        await one.update_state(
            UpdateState.parse({"uri": f"bb://{ws}/t/b", "digest": "d", "body": "x"}), author="a"
        )
        await one.link_state(
            LinkState.parse({"src": f"bb://{ws}/t/a", "rel": "cites", "dst": [f"bb://{ws}/t/b"]}),
            author="a",
        )
        with pytest.raises(Unconfirmed):
            await two.update_state(
                UpdateState.parse(
                    {"uri": f"bb://{ws}/t/a", "digest": "d2", "body": "y", "expect_version": 1}
                ),
                author="a",
            )
        # Applied all the same: the next writer sees version 2.
        read = await one.get_state(GetState.parse({"uris": [f"bb://{ws}/t/a"]}))
        assert read["items"][0]["version"] == 2
        with pytest.raises(Unconfirmed):
            await two.link_state(
                LinkState.parse(
                    {"src": f"bb://{ws}/t/b", "rel": "cites", "dst": [f"bb://{ws}/t/a"]}
                ),
                author="a",
            )
    finally:
        await one.close()
        await two.close()


async def test_export_import_delete_and_retention_work_on_the_cluster(
    cluster_gateway: GatewayProcess,
    redis_cluster: LocalCluster,
    issuer: TokenIssuer,
    tmp_path: Path,
) -> None:
    """The operator's commands route each workspace's keys to its own primary, like the tools.

    Two workspaces whose slots sit on different primaries: one is exported and imported as
    the other, a topic of the copy is deleted, the original is swept by retention, and the
    copy is then deleted whole; no node answers CROSSSLOT at any point.
    """
    suffix = uuid.uuid4().hex[:6]
    source = next(
        f"src{i}-{suffix}"
        for i in range(64)
        if redis_cluster.owner_of(f"{{src{i}-{suffix}}}").port
        != redis_cluster.owner_of(f"{{dst-{suffix}}}").port
    )
    target = f"dst-{suffix}"
    async with mcp_client(cluster_gateway.mcp_url, agent_token(issuer, source)) as client:
        for args in (
            {"uri": f"bb://{source}/t/a", "digest": "alpha kafka", "body": "lorem " * 3000 + "end"},
            {"uri": f"bb://{source}/t/b", "digest": "beta", "body": "short"},
            {"uri": f"bb://{source}/u/c", "digest": "table", "columns": ["k"], "rows": [["v"]]},
        ):
            err, body = await call(client, "update_state", **args)
            assert not err, body
        err, body = await call(
            client,
            "link_state",
            src=f"bb://{source}/t/b",
            rel="supersedes",
            dst=[f"bb://{source}/t/a"],
        )
        assert not err, body
    for node in redis_cluster.live():
        node.command("CONFIG", "RESETSTAT")

    dump = tmp_path / "source.jsonl"
    exported = _cli(redis_cluster, "export", "--workspace", source, "--out", str(dump))
    assert exported.returncode == 0, exported.stderr
    imported = _cli(redis_cluster, "import", str(dump), "--workspace", target)
    assert imported.returncode == 0, imported.stderr
    async with mcp_client(cluster_gateway.mcp_url, agent_token(issuer, target)) as client:
        err, body = await call(
            client,
            "get_state",
            uris=[f"bb://{target}/t/a", f"bb://{target}/u/c"],
            mode="full",
            budget_tokens=20000,
        )
        assert not err, body
        assert body["items"][0]["body"] == "lorem " * 3000 + "end"
        # t/b supersedes t/a in the copy too: the link came over with the notes.
        assert any("superseded" in w for w in body.get("warnings", [])), body
        err, body = await call(client, "search_keys", q="kafka")
        assert not err and [i["uri"] for i in body["items"]] == [f"bb://{target}/t/a"], body

        deleted = _cli(redis_cluster, "delete", "--workspace", target, "--topic", "t", "--yes")
        assert deleted.returncode == 0, deleted.stderr
        err, body = await call(client, "list_keys")
        assert not err and [i["uri"] for i in body["items"]] == [f"bb://{target}/u/c"], body
        err, body = await call(client, "search_keys", q="kafka")
        assert not err and body["items"] == [], body

    # The gateway's sweeper (every second here) removes the original's notes once they are
    # older than a second.
    kept = _cli(
        redis_cluster, "retention", "set", "--workspace", source, "--max-age", "1s", "--yes"
    )
    assert kept.returncode == 0, kept.stderr
    async with mcp_client(cluster_gateway.mcp_url, agent_token(issuer, source)) as client:
        deadline = time.monotonic() + 20
        while True:
            err, body = await call(client, "list_keys")
            assert not err, body
            if not body["items"] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        assert body["items"] == [], body

    gone = _cli(redis_cluster, "delete", "--workspace", target, "--yes")
    assert gone.returncode == 0, gone.stderr
    health = _cli(redis_cluster, "health")
    assert health.returncode == 0, health.stderr
    notes = json.loads(health.stdout)["notes"]
    assert target not in notes and notes.get(source) == 0, notes
    assert not any("errorstat_CROSSSLOT" in e for e in _slot_errors(redis_cluster).values())


async def test_note_history_lives_in_the_workspaces_slot_and_reads_back_on_a_cluster(
    redis_cluster: LocalCluster,
) -> None:
    board = Board.from_url(redis_cluster.url)
    ws = f"hist-{uuid.uuid4().hex[:8]}"
    note = f"bb://{ws}/t/n"
    big = "offloaded " * 2000
    try:
        await board.start()
        for body in ("one", big, "three"):
            await board.update_state(
                UpdateState.parse({"uri": note, "digest": "D.", "body": body}), author="a"
            )
        await board.update_state(
            UpdateState.parse({"uri": note, "digest": "D.", "append": " more"}), author="a"
        )
        read = await board.get_state(
            GetState.parse({"uris": [f"{note}@1", f"{note}@2", f"{note}@3"], "mode": "full",
                            "budget_tokens": 100_000})
        )  # fmt: skip
        assert [i["body"] for i in read["items"]] == ["one", big, "three"]
        page = await board.list_keys(ListKeys.parse({"topic": note}), workspace=ws)
        assert [i["version"] for i in page["items"]] == [4, 3, 2, 1]
        owner = redis_cluster.owner_of(f"{{{ws}}}")
        kept = owner.command("KEYS", f"bbh*:{{{ws}}}:*")
        assert len(kept) == 4, kept  # three kept copies and the note's set, on the owner
        await board.delete(author="a", workspace=ws, uri=note)
        assert owner.command("KEYS", f"bbh*:{{{ws}}}:*") == []
    finally:
        await board.close()
