"""All five tools end to end: the SDK's client -> the gateway -> the real Redis.

The gateway's app runs in this process (tests/app_support.py) wherever what is tested is what
it answers; a gateway process where a second process, several workers or a command line that
reaches it over a socket are the point.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from app_support import MCP_PATH, InProcessGateway
from mcp.client import Client
from support import GatewayProcess, agent_token, call, mcp_client, start_gateway, stop_gateway

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis, free_port


async def test_all_five_tools_round_trip_through_the_gateway(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    note = f"bb://{workspace}/research/findings/one"
    other = f"bb://{workspace}/research/findings/two"
    async with app_gateway.mcp_client(token) as client:
        err, body = await call(
            client,
            "update_state",
            uri=note,
            digest="Zebras sleep standing up",
            body="Observed in the field.",
            expect_version=0,
        )
        assert not err and body["version"] == 1 and body["warnings"] == []
        err, body = await call(
            client,
            "update_state",
            uri=other,
            digest="Lions hunt at night",
            columns=["animal", "hours"],
            rows=[["lion", 20]],
            expect_version=0,
        )
        assert not err and body["version"] == 1
        err, body = await call(client, "link_state", src=other, rel="contradicts", dst=[note])
        assert not err and body["linked"] == [note]
        err, body = await call(client, "get_state", uris=[note, other], mode="full")
        assert not err
        assert [i["version"] for i in body["items"]] == [1, 1]
        assert body["items"][0]["body"] == "Observed in the field."
        assert body["items"][1]["rows"] == [["lion", "20"]]
        # Both ends are in the answer: the link is said once, from the side that contradicts.
        assert f"{other} contradicts {note}" in body["warnings"]
        assert f"{note} is contradicted by {other}" not in body["warnings"]
        assert body["truncated"] is False and body["cursor"] >= 3
        err, body = await call(client, "list_keys", topic="research", mode="table")
        assert not err
        assert body["table"].splitlines()[0] == "uri\tdigest\tversion\test_tokens"
        assert len(body["table"].splitlines()) == 3
        err, body = await call(client, "search_keys", q="zebras")
        assert not err and [i["uri"] for i in body["items"]] == [note]


async def test_a_stale_expect_version_is_a_structured_conflict_and_writes_nothing(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    note = f"bb://{workspace}/plan/current"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        await call(client, "update_state", uri=note, digest="v1", body="a", expect_version=0)
        err, body = await call(
            client, "update_state", uri=note, digest="v2", body="b", expect_version=5
        )
        assert err
        assert body["error"]["code"] == "conflict"
        assert body["error"]["current_version"] == 1
        assert body["error"]["current_digest"] == "v1"
        assert body["error"]["hint"]
        _, read = await call(client, "get_state", uris=[note], mode="full")
        assert read["items"][0]["body"] == "a" and read["items"][0]["version"] == 1


async def test_bad_input_gets_invalid_argument_with_a_hint_never_a_trace(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        cases = [
            (
                "update_state",
                {"uri": f"bb://{workspace}/t/x", "body": "no digest"},
                "invalid_argument",
            ),
            (
                "update_state",
                {"uri": f"bb://{workspace}/t/../x", "digest": "d"},
                "invalid_argument",
            ),
            ("update_state", {"uri": f"bb://{workspace}/t/x", "digest": "d" * 5000}, "too_large"),
            (
                "get_state",
                {"uris": [f"bb://{workspace}/t/x"], "mode": "everything"},
                "invalid_argument",
            ),
            ("get_state", {"uri": "typo"}, "invalid_argument"),
            (
                "link_state",
                {"src": f"bb://{workspace}/t/x", "rel": "likes", "dst": [f"bb://{workspace}/t/y"]},
                "invalid_argument",
            ),
            ("search_keys", {"q": "x" * 20_000}, "too_large"),
        ]
        for tool, args, code in cases:
            err, body = await call(client, tool, **args)
            assert err, (tool, args)
            assert body["error"]["code"] == code, (tool, args, body)
            assert "Traceback" not in body["error"]["message"]
        _, listing = await call(client, "list_keys", topic="t")
        assert listing["items"] == []


async def test_scopes_refuse_before_the_handler_and_never_leak_other_topics(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    secret = f"bb://{workspace}/secret/plan"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as admin:
        await call(
            admin,
            "update_state",
            uri=secret,
            digest="the hidden plan about otters",
            body="x",
            expect_version=0,
        )
    narrow = agent_token(
        issuer,
        workspace,
        read=["public-*"],
        write=["public-notes"],
        caps=["board_read", "board_write"],
    )
    async with app_gateway.mcp_client(narrow) as client:
        err, body = await call(client, "get_state", uris=[secret])
        assert not err and body["items"] == [{"uri": secret, "error": "forbidden"}], body
        assert "secret" in body["warnings"][0] and "otters" not in json.dumps(body)
        err, body = await call(
            client, "update_state", uri=f"bb://{workspace}/secret/x", digest="d", body="b"
        )
        assert err and body["error"]["code"] == "forbidden"
        err, body = await call(
            client,
            "update_state",
            uri=f"bb://{workspace}/public-notes/f",
            digest="d",
            source_path="f.txt",
        )
        assert err and body["error"]["code"] == "forbidden"
        assert "file_read" in body["error"]["message"]
        err, body = await call(client, "search_keys", q="otters")
        assert not err and body["items"] == []
        err, body = await call(client, "get_state", uris=[f"bb://other-{workspace}/public-a/x"])
        assert err and body["error"]["code"] == "forbidden"


async def test_a_batch_reads_what_it_may_and_refuses_the_rest_per_item_without_a_leak(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    shown = f"bb://{workspace}/public-a/shown"
    secret = f"bb://{workspace}/ops/plan"
    absent = f"bb://{workspace}/ops/nothing-here"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as admin:
        for uri, digest in ((shown, "the open note"), (secret, "the runbook of the otters")):
            err, _ = await call(admin, "update_state", uri=uri, digest=digest, body="x" * 900)
            assert not err
    narrow = agent_token(issuer, workspace, read=["public-*"], write=[])
    async with app_gateway.mcp_client(narrow) as client:
        for mode in ("digest", "full", "ref"):
            err, body = await call(
                client, "get_state", uris=[secret, shown, absent, f"{secret}@1"], mode=mode
            )
            assert not err, body
            items = body["items"]
            assert items[1]["uri"] == shown and items[1]["digest"] == "the open note"
            # A note that exists and one that does not are refused alike: nothing tells
            # them apart, not the shape, not a size, not a version.
            refused = [items[0], items[2], items[3]]
            assert refused == [
                {"uri": secret, "error": "forbidden"},
                {"uri": absent, "error": "forbidden"},
                {"uri": f"{secret}@1", "error": "forbidden"},
            ], body
            assert body["warnings"] == [
                "the token may not read topic 'ops'; those items are refused"
            ]
            assert "otters" not in json.dumps(body)
            assert body["omitted"] == 0 and not body["truncated"]


async def test_a_writer_may_not_link_to_or_cite_a_note_it_may_not_read(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    secret = f"bb://{workspace}/vault/s"
    mine = f"bb://{workspace}/pub/mine"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as admin:
        await call(admin, "update_state", uri=secret, digest="hidden", body="", expect_version=0)
        await call(admin, "update_state", uri=mine, digest="open", body="", expect_version=0)
    # May read and write pub, and nothing else: the vault note's name is all it knows.
    pub_only = agent_token(issuer, workspace, read=["pub"], write=["pub"])
    async with app_gateway.mcp_client(pub_only) as client:
        err, body = await call(client, "link_state", src=mine, rel="cites", dst=[secret])
        assert err and body["error"]["code"] == "forbidden", body
        assert "vault" in body["error"]["message"]
        err, body = await call(
            client,
            "update_state",
            uri=mine,
            digest="now citing the vault",
            body="",
            sources=[secret],
            expect_version=1,
        )
        assert err and body["error"]["code"] == "forbidden", body
        assert "vault" in body["error"]["message"]
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as admin:
        _, read = await call(
            admin,
            "get_state",
            uris=[mine, secret],
            mode="fields",
            fields=["version", "links", "sources"],
        )
    [pub_item, vault_item] = read["items"]
    assert pub_item["version"] == 1 and pub_item.get("links", []) == [], pub_item
    assert pub_item.get("sources", []) == [], pub_item
    assert vault_item.get("links", []) == [], vault_item


async def test_missing_or_bad_tokens_get_http_401_with_www_authenticate(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    request = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    http = app_gateway.http
    plain = await http.post(MCP_PATH, content=request, headers=headers)
    assert plain.status_code == 401
    assert plain.headers["www-authenticate"].startswith("Bearer")
    forged = agent_token(issuer, workspace)[:-4] + "AAAA"
    bad = await http.post(
        MCP_PATH,
        content=request,
        headers={**headers, "Authorization": f"Bearer {forged}"},
    )
    assert bad.status_code == 401
    assert 'error="invalid_token"' in bad.headers["www-authenticate"]
    assert bad.json()["error"]["data"]["code"] == "unauthenticated"


async def test_a_request_body_over_the_limit_is_refused_before_parsing(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    response = await app_gateway.http.post(
        MCP_PATH,
        content=b"{" + b" " * (3 * 1024 * 1024),
        headers={
            "Authorization": f"Bearer {agent_token(issuer, workspace)}",
            "Content-Type": "application/json",
        },
    )
    assert response.status_code == 413
    assert response.json()["error"]["data"]["code"] == "too_large"


async def test_a_revoked_token_is_refused_by_every_gateway_process(
    app_gateway: InProcessGateway,
    redis_server: EmbeddedRedis,
    issuer: TokenIssuer,
    workspace: str,
    tmp_path: Path,
) -> None:
    # The app in this process issues and revokes; a gateway in a process of its own, sharing
    # only Redis, must refuse the revoked token.
    second = start_gateway(redis_server.url, tmp_path / "second")
    try:
        admin = issuer.issue(
            subject="boss",
            workspace=workspace,
            read=["*"],
            write=["*"],
            capabilities=["admin", "board_read", "board_write"],
            ttl_seconds=600,
        )
        http = app_gateway.http
        issued = await http.post(
            "/admin/tokens",
            headers={"Authorization": f"Bearer {admin}"},
            json={
                "sub": "worker",
                "workspace": workspace,
                "read": ["notes"],
                "write": ["notes"],
                "caps": ["board_read", "board_write"],
                "ttl_seconds": 300,
            },
        )
        assert issued.status_code == 200, issued.text
        worker = issued.json()
        too_much = await http.post(
            "/admin/tokens",
            headers={"Authorization": f"Bearer {admin}"},
            json={"sub": "x", "workspace": workspace, "caps": ["file_read"]},
        )
        assert too_much.status_code == 403
        uri = f"bb://{workspace}/notes/a"
        async with mcp_client(second.mcp_url, worker["token"]) as client:
            err, _ = await call(client, "update_state", uri=uri, digest="d", body="b")
            assert not err
        revoked = await http.post(
            "/admin/revoke",
            headers={"Authorization": f"Bearer {admin}"},
            json={"id": worker["id"]},
        )
        assert revoked.status_code == 200
        async with mcp_client(second.mcp_url, worker["token"]) as client:
            err, body = await call(client, "get_state", uris=[uri])
            assert err and body["error"]["code"] == "unauthenticated"
    finally:
        stop_gateway(second)


async def test_two_gateway_processes_race_cas_on_one_note_without_lost_updates(
    app_gateway: InProcessGateway,
    redis_server: EmbeddedRedis,
    issuer: TokenIssuer,
    workspace: str,
    tmp_path: Path,
) -> None:
    # One gateway is the app in this process, the other a process of its own: the two
    # share only Redis.
    second = start_gateway(redis_server.url, tmp_path / "second")
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/counter/n"
    try:
        async with app_gateway.mcp_client(token) as client:
            await call(
                client, "update_state", uri=uri, digest="counter", body="0", expect_version=0
            )

        def client_of(url: str | None) -> contextlib.AbstractAsyncContextManager[Client]:
            return app_gateway.mcp_client(token) if url is None else mcp_client(url, token)

        async def worker(url: str | None, n: int) -> int:
            conflicts = 0
            async with client_of(url) as client:
                done = 0
                while done < n:
                    _, read = await call(client, "get_state", uris=[uri], mode="full")
                    item = read["items"][0]
                    err, body = await call(
                        client,
                        "update_state",
                        uri=uri,
                        digest="counter",
                        body=str(int(item["body"]) + 1),
                        expect_version=item["version"],
                    )
                    if err:
                        assert body["error"]["code"] == "conflict"
                        conflicts += 1
                    else:
                        done += 1
            return conflicts

        await asyncio.gather(*(worker(u, 10) for u in (None, second.mcp_url) * 2))
        async with mcp_client(second.mcp_url, token) as client:
            _, read = await call(client, "get_state", uris=[uri], mode="full")
        assert read["items"][0]["body"] == "40"
        assert read["items"][0]["version"] == 41
    finally:
        stop_gateway(second)


async def test_health_readiness_and_metrics_answer(app_gateway: InProcessGateway) -> None:
    http = app_gateway.http
    assert (await http.get("/healthz")).status_code == 200
    assert (await http.get("/readyz")).json() == {"status": "ready"}
    metrics = (await http.get("/metrics")).text
    assert "bb_tool_calls_total" in metrics


async def test_get_and_delete_on_the_endpoint_get_405_since_no_session_is_kept(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    headers = {
        "Authorization": f"Bearer {agent_token(issuer, workspace)}",
        "Accept": "text/event-stream",
    }
    for method in ("GET", "DELETE"):
        for url in (MCP_PATH, MCP_PATH.rstrip("/")):
            response = await app_gateway.http.request(method, url, headers=headers)
            assert response.status_code == 405, (method, url)
            assert response.headers["allow"] == "POST"
            assert response.json()["error"]["code"] == "method_not_allowed"


async def test_both_protocol_eras_are_served_by_the_same_endpoint(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    """Handshake-era clients (2025-06-18) and single-exchange ones (2026-07-28) both work."""
    uri = f"bb://{workspace}/eras/note"
    headers = {
        "Authorization": f"Bearer {agent_token(issuer, workspace)}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    handshake = {"MCP-Protocol-Version": "2025-06-18"}
    single = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def request(tool: str, arguments: dict[str, object], *, modern: bool) -> bytes:
        params: dict[str, object] = {"name": tool, "arguments": arguments}
        if modern:
            params["_meta"] = meta
        return orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})

    http = app_gateway.http
    created = await http.post(
        MCP_PATH,
        content=request("update_state", {"uri": uri, "digest": "d1", "body": "b"}, modern=False),
        headers={**headers, **handshake},
    )
    assert created.status_code == 200
    assert created.json()["result"]["structuredContent"]["version"] == 1
    read = await http.post(
        MCP_PATH,
        content=request("get_state", {"uris": [uri]}, modern=True),
        headers={**headers, **single, "Mcp-Name": "get_state"},
    )
    assert read.status_code == 200
    [item] = read.json()["result"]["structuredContent"]["items"]
    assert (item["uri"], item["digest"], item["version"]) == (uri, "d1", 1)
    stale = await http.post(
        MCP_PATH,
        content=request(
            "update_state",
            {"uri": uri, "digest": "d2", "body": "c", "expect_version": 0},
            modern=True,
        ),
        headers={**headers, **single, "Mcp-Name": "update_state"},
    )
    result = stale.json()["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "conflict"


def _worker_pids(parent: int) -> set[int]:
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return {int(pid) for pid in children}


def _owner_of_connection(server_port: int, client_port: int, pids: set[int]) -> int | None:
    """The process holding the server end of the TCP connection from ``client_port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1].rsplit(":", 1)[1], fields[2].rsplit(":", 1)[1]
            if int(local, 16) == server_port and int(remote, 16) == client_port:
                inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) in inodes:
                    return pid
    return None


async def _call_on(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, token: str, body: bytes
) -> dict[str, object]:
    port = writer.get_extra_info("peername")[1]
    writer.write(
        f"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
        + b"Content-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n"
        + f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n".encode()
        + b"Connection: close\r\n\r\n"
        + body
    )
    raw = await reader.read()
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), raw[:500]
    result = orjson.loads(payload)["result"]
    assert isinstance(result, dict)
    return result


@pytest.mark.slow
async def test_several_workers_serve_one_board_with_no_session_affinity(
    redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str, tmp_path: Path
) -> None:
    gateway = start_gateway(redis_server.url, tmp_path / "gw", workers=2)
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/workers/counter"
    port = int(gateway.url.rsplit(":", 1)[1])
    try:
        workers = _worker_pids(gateway.process.pid)
        assert len(workers) >= 2, workers
        # Connections held open side by side, each looked up in /proc to find the worker
        # process that accepted it; each then carries one CAS write. Every write must land on
        # the version the other worker's write left, and both workers must have answered.
        served: dict[int, int] = {}
        # The kernel gives a new connection to whichever worker accepts first; on a busy
        # machine one may win many times running, so up to 200 are tried (a dozen is usual).
        for version in range(1, 201):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            client_port = writer.get_extra_info("sockname")[1]
            owner = None
            async with asyncio.timeout(10):
                while owner is None:
                    owner = _owner_of_connection(port, client_port, workers)
                    await asyncio.sleep(0.01)
            request = {
                "jsonrpc": "2.0",
                "id": version,
                "method": "tools/call",
                "params": {
                    "name": "update_state",
                    "arguments": {
                        "uri": uri,
                        "digest": f"count {version}",
                        "body": str(version),
                        "expect_version": version - 1,
                    },
                },
            }
            try:
                result = await _call_on(reader, writer, token, orjson.dumps(request))
            finally:
                writer.close()
            assert result["isError"] is False, result
            assert result["structuredContent"]["version"] == version, result  # type: ignore[index]
            served[owner] = served.get(owner, 0) + 1
            if len(served) == 2 and version >= 12:
                break
        assert len(served) == 2, f"one worker answered every call: {served}"
        async with mcp_client(gateway.mcp_url, token) as client:
            err, body = await call(client, "get_state", uris=[uri], mode="full")
        assert not err and body["items"][0]["body"] == str(version)
    finally:
        stop_gateway(gateway)


async def test_the_health_command_reports_the_board_and_fails_when_redis_is_gone(
    gateway: GatewayProcess, redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    async with mcp_client(gateway.mcp_url, token) as client:
        for n in range(3):
            await call(client, "update_state", uri=f"bb://{workspace}/h/n{n}", digest="d", body="b")

    def health(redis_url: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "blackboard_mcp.cli", "health", "--url", gateway.url],
            env={**os.environ, "BB_REDIS_URL": redis_url},
            capture_output=True,
            text=True,
            timeout=60,
        )

    good = health(redis_server.url)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "gateway /readyz: 200" in good.stdout
    report = json.loads(good.stdout[good.stdout.index("{") :])
    assert report["redis"] == "ok" and report["index"] == "ready"
    assert report["notes"][workspace] == 3
    assert report["used_memory_bytes"] > 0

    bad = health(f"redis://127.0.0.1:{free_port()}/0")
    assert bad.returncode == 1
    assert '"redis": "unavailable"' in bad.stdout


async def test_listing_or_searching_a_topic_the_token_cannot_read_is_refused_not_emptied(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    writer = agent_token(issuer, workspace)
    async with app_gateway.mcp_client(writer) as client:
        err, _ = await call(
            client, "update_state", uri=f"bb://{workspace}/vault/k", digest="Hidden.", body="x"
        )
        assert not err
    reader = agent_token(issuer, workspace, sub="reader", read=["public"])
    async with app_gateway.mcp_client(reader) as client:
        for tool, args in (("list_keys", {}), ("search_keys", {"q": "hidden"})):
            err, body = await call(client, tool, topic="vault", **args)
            # Refused before the handler, naming the topic: an empty answer would read as
            # "nothing there".
            assert err and body["error"]["code"] == "forbidden", (tool, body)
            assert "vault" in body["error"]["message"]


async def test_a_missing_catch_up_note_says_what_it_is_and_resource_counts_are_plural_right(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        catch_up = f"bb://{workspace}/run/state/current"
        err, body = await call(client, "get_state", uris=[catch_up, f"bb://{workspace}/x/y"])
        assert not err
        first, other = body["items"]
        assert first["error"] == "not_found" and "catch-up note" in first["hint"]
        assert "update_state" in first["hint"]
        assert other == {"uri": f"bb://{workspace}/x/y", "error": "not_found"}  # no hint
        err, _ = await call(
            client, "update_state", uri=f"bb://{workspace}/solo/n", digest="D.", body=""
        )
        assert not err
        resources = await client.list_resources()
        [solo] = [r for r in resources.resources if r.name == "solo"]
        assert solo.description == "1 note; subscribe for changes to any of them"
