"""Revocations and rate limits: kept per workspace, lasting as long as the token, counted last.

Two workspaces with agents of the same names share one gateway and one Redis, as tenants of a
real deployment do. Every test runs against a gateway (the app in process, on the real Redis)
whose rate limit is a handful of calls a minute, so a limit crossing a workspace would show.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import redis
from app_support import InProcessGateway, in_process_gateway
from redis.crc import key_slot
from support import admin_token, agent_token, call

from blackboard_mcp.auth import Grant, TokenIssuer
from blackboard_mcp.store import Board, EmbeddedRedis, RedisRevocationList
from blackboard_mcp.store.access._admission import RedisCallAdmission
from blackboard_mcp.store.access._ratelimit import RedisRateLimiter

LIMIT = 5
MAX_TOKEN_TTL = 90 * 86400  # BB_MAX_TOKEN_TTL's documented default


@pytest.fixture
async def limited(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    async with in_process_gateway(redis_url, tmp_path, rate_limit_per_minute=LIMIT) as gateway:
        yield gateway


def fresh_workspace() -> str:
    return "ws-" + uuid.uuid4().hex[:12]


def token_id(token: str) -> str:
    return str(jwt.decode(token, options={"verify_signature": False})["jti"])


async def revoke(
    gateway: InProcessGateway, admin: str, body: Any, *, force: bool = True
) -> httpx.Response:
    """POST /admin/revoke. The tokens here are made with the key, not issued through the
    board, so none is on record: a revocation by id or subject is forced unless told not."""
    if force and isinstance(body, dict) and ("id" in body or "sub" in body):
        body = {**body, "force": True}
    return await gateway.http.post(
        "/admin/revoke", headers={"Authorization": f"Bearer {admin}"}, json=body
    )


async def outcome(gateway: InProcessGateway, token: str, workspace: str) -> str:
    """The error code of one read by ``token`` ("ok" when it is answered)."""
    async with gateway.mcp_client(token) as client:
        err, body = await call(client, "get_state", uris=[f"bb://{workspace}/notes/n"])
    return body["error"]["code"] if err else "ok"


async def test_an_admin_revoking_a_subject_locks_out_only_its_own_workspaces_agent(
    limited: InProcessGateway, issuer: TokenIssuer
) -> None:
    acme, other = fresh_workspace(), fresh_workspace()
    acme_agent = agent_token(issuer, acme, sub="shared-agent")
    other_agent = agent_token(issuer, other, sub="shared-agent")
    answer = await revoke(limited, admin_token(issuer, other), {"sub": "shared-agent"})
    assert answer.status_code == 200, answer.text
    assert await outcome(limited, other_agent, other) == "unauthenticated"
    assert await outcome(limited, acme_agent, acme) == "ok"


async def test_an_admin_cannot_revoke_another_workspaces_token_by_id_or_by_presenting_it(
    limited: InProcessGateway, issuer: TokenIssuer
) -> None:
    acme, other = fresh_workspace(), fresh_workspace()
    acme_agent = agent_token(issuer, acme, sub="worker-1")
    other_admin = admin_token(issuer, other)
    # An id names a token of the admin's own workspace: another workspace's is not found
    # there, and untouched even when forced.
    answer = await revoke(limited, other_admin, {"id": token_id(acme_agent)}, force=False)
    assert answer.status_code == 404, answer.text
    answer = await revoke(limited, other_admin, {"id": token_id(acme_agent)})
    assert answer.status_code == 200, answer.text
    assert await outcome(limited, acme_agent, acme) == "ok"
    answer = await revoke(limited, other_admin, {"token": acme_agent})
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["code"] == "forbidden"
    assert await outcome(limited, acme_agent, acme) == "ok"
    # The workspace's own admin can.
    answer = await revoke(limited, admin_token(issuer, acme), {"token": acme_agent})
    assert answer.status_code == 200, answer.text
    assert await outcome(limited, acme_agent, acme) == "unauthenticated"


async def test_one_workspaces_agent_cannot_spend_another_workspaces_rate_limit(
    limited: InProcessGateway, issuer: TokenIssuer
) -> None:
    acme, other = fresh_workspace(), fresh_workspace()
    sub = "worker-" + uuid.uuid4().hex[:6]
    busy = agent_token(issuer, other, sub=sub)
    async with limited.mcp_client(busy) as client:
        codes = []
        for _ in range(LIMIT + 1):
            err, body = await call(client, "get_state", uris=[f"bb://{other}/notes/n"])
            codes.append(body["error"]["code"] if err else "ok")
    assert codes == ["ok"] * LIMIT + ["rate_limited"]
    assert await outcome(limited, agent_token(issuer, acme, sub=sub), acme) == "ok"


async def test_a_revoked_token_does_not_spend_its_subjects_rate_limit(
    limited: InProcessGateway, issuer: TokenIssuer
) -> None:
    ws = fresh_workspace()
    sub = "worker-" + uuid.uuid4().hex[:6]
    stolen = agent_token(issuer, ws, sub=sub)
    answer = await revoke(limited, admin_token(issuer, ws), {"id": token_id(stolen)})
    assert answer.status_code == 200, answer.text
    async with limited.mcp_client(stolen) as client:
        for _ in range(2 * LIMIT):
            err, body = await call(client, "get_state", uris=[f"bb://{ws}/notes/n"])
            assert err and body["error"]["code"] == "unauthenticated"
    # The token that replaced it still has its whole budget.
    replacement = agent_token(issuer, ws, sub=sub)
    async with limited.mcp_client(replacement) as client:
        for _ in range(LIMIT):
            err, body = await call(client, "get_state", uris=[f"bb://{ws}/notes/n"])
            assert not err, body


def marks_of(redis_url: str, name: str) -> dict[str, int]:
    """The revocation marks whose key names ``name``, with their remaining seconds."""
    client = redis.Redis.from_url(redis_url)
    try:
        return {
            key.decode(): int(client.ttl(key))
            for key in client.scan_iter(match=f"bbrv:*{name}*", count=1000)
        }
    finally:
        client.close()


async def test_a_revocation_lasts_as_long_as_the_token_whatever_the_caller_says(
    limited: InProcessGateway, redis_server: EmbeddedRedis, issuer: TokenIssuer
) -> None:
    ws = fresh_workspace()
    admin = admin_token(issuer, ws)
    presented = agent_token(issuer, ws, sub="w-presented", ttl=900)
    by_id = agent_token(issuer, ws, sub="w-by-id", ttl=900)
    # The caller cannot say when a revocation ends.
    answer = await revoke(limited, admin, {"id": token_id(by_id), "expires_at": time.time() + 1})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_argument"
    assert not marks_of(redis_server.url, token_id(by_id))
    # A presented token is revoked until its own expiry (the server read it from the token).
    assert (await revoke(limited, admin, {"token": presented})).status_code == 200
    [ttl] = marks_of(redis_server.url, token_id(presented)).values()
    assert 900 <= ttl <= 900 + 300
    # An id alone tells nothing of the expiry: the mark outlives any token the board accepts.
    assert (await revoke(limited, admin, {"id": token_id(by_id)})).status_code == 200
    [ttl] = marks_of(redis_server.url, token_id(by_id)).values()
    assert MAX_TOKEN_TTL <= ttl <= MAX_TOKEN_TTL + 300
    assert (await revoke(limited, admin, {"sub": "w-subject"})).status_code == 200
    [ttl] = marks_of(redis_server.url, "w-subject").values()
    assert MAX_TOKEN_TTL <= ttl <= MAX_TOKEN_TTL + 300
    for token in (presented, by_id):
        assert await outcome(limited, token, ws) == "unauthenticated"


async def test_a_revoke_is_audited_in_the_workspace_it_affects_only(
    limited: InProcessGateway, redis_server: EmbeddedRedis, issuer: TokenIssuer
) -> None:
    acme, other = fresh_workspace(), fresh_workspace()
    assert (
        await revoke(limited, admin_token(issuer, other), {"sub": "shared-agent"})
    ).status_code == 200
    client = redis.Redis.from_url(redis_server.url)
    try:
        streams = {
            key.decode(): [f[b"tool"].decode() for _id, f in client.xrange(key)]
            for key in client.scan_iter(match="bbau:*", count=1000)
            if acme in key.decode() or other in key.decode()
        }
    finally:
        client.close()
    assert streams == {f"bbau:{{{other}}}": ["admin.revoke"]}


class CommandLog:
    """Every command Redis receives while it is open (Redis's MONITOR)."""

    def __init__(self, redis_url: str) -> None:
        self._client = redis.Redis.from_url(redis_url)
        self._marker = "end-of-log-" + uuid.uuid4().hex
        self.commands: list[dict[str, Any]] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)

    def _listen(self) -> None:
        with self._client.monitor() as monitor:
            self._ready.set()
            for command in monitor.listen():
                if self._marker in command["command"]:
                    return
                self.commands.append(command)

    def __enter__(self) -> CommandLog:
        self._thread.start()
        assert self._ready.wait(5)
        return self

    def __exit__(self, *_exc: object) -> None:
        # Commands reach the listener in order: everything before the marker is in.
        self._client.echo(self._marker)
        self._thread.join(5)
        assert not self._thread.is_alive()
        self._client.close()


async def test_the_per_call_check_is_one_command_on_the_workspaces_slot(
    limited: InProcessGateway, redis_server: EmbeddedRedis, issuer: TokenIssuer
) -> None:
    ws = fresh_workspace()
    sub = "slot-" + uuid.uuid4().hex[:6]
    token = agent_token(issuer, ws, sub=sub)
    # Marks exist for the subject and for another token, so the check reads real keys.
    admin = admin_token(issuer, ws)
    assert (await revoke(limited, admin, {"sub": "someone-else"})).status_code == 200
    assert await outcome(limited, agent_token(issuer, ws, sub="warm-up"), ws) == "ok"
    with CommandLog(redis_server.url) as log:
        assert await outcome(limited, token, ws) == "ok"
    sent = [c["command"].split(" ") for c in log.commands if c["client_type"] != "lua"]
    # The audit record names the subject too; it is written off the call's path.
    checks = [c for c in sent if c[0].upper() != "XADD" and any(sub in part for part in c)]
    # One command names the caller's subject: the revocation check and the count together.
    assert len(checks) == 1, checks
    touched = [
        part
        for c in log.commands
        for part in c["command"].split(" ")
        if part.startswith(("bbrv:", "bbrl:"))
    ]
    assert touched
    assert {key_slot(k.encode()) for k in touched} == {key_slot(f"{{{ws}}}".encode())}


async def test_a_revoked_tokens_writes_are_refused_in_their_first_round_trip_writing_nothing(
    limited: InProcessGateway, redis_server: EmbeddedRedis, issuer: TokenIssuer
) -> None:
    ws = fresh_workspace()
    sub = "gone-" + uuid.uuid4().hex[:6]
    token = agent_token(issuer, ws, sub=sub)
    reader = agent_token(issuer, ws, sub="reader-" + uuid.uuid4().hex[:6])
    async with limited.mcp_client(token) as client:
        for path in ("a", "b"):
            err, body = await call(
                client, "update_state", uri=f"bb://{ws}/notes/{path}", digest="v1", body="x"
            )
            assert not err, body
    assert (await revoke(limited, admin_token(issuer, ws), {"sub": sub})).status_code == 200
    with CommandLog(redis_server.url) as log:
        async with limited.mcp_client(token) as client:
            err, body = await call(
                client,
                "update_state",
                uri=f"bb://{ws}/notes/a",
                digest="v2",
                body="y",
                expect_version=1,
            )
            assert err and body["error"]["code"] == "unauthenticated", body
            err, body = await call(
                client, "update_state", uri=f"bb://{ws}/notes/new", digest="v1", body="z"
            )
            assert err and body["error"]["code"] == "unauthenticated", body
            err, body = await call(
                client,
                "link_state",
                src=f"bb://{ws}/notes/a",
                rel="cites",
                dst=[f"bb://{ws}/notes/b"],
            )
            assert err and body["error"]["code"] == "unauthenticated", body
    sent = [c["command"].split(" ")[0].strip('"').upper() for c in log.commands]
    sent = [c for c in sent if c != "XADD"]  # the audit records, written off the call's path
    # Each write sent its WATCH, its reads and the admission check, and nothing after them
    # but the UNWATCH that gives the connection back clean.
    assert "MULTI" not in sent and "EXEC" not in sent, sent
    assert sent.count("UNWATCH") == 3, sent
    async with limited.mcp_client(reader) as client:
        err, body = await call(
            client,
            "get_state",
            uris=[f"bb://{ws}/notes/a", f"bb://{ws}/notes/new"],
            mode="full",
        )
    assert not err, body
    first, new = body["items"]
    assert (first["uri"], first["version"], first["body"]) == (f"bb://{ws}/notes/a", 1, "x")
    assert first.get("links", []) == [], first
    assert new == {"uri": f"bb://{ws}/notes/new", "error": "not_found"}, new


async def test_a_write_counts_once_against_the_rate_limit_and_past_it_writes_nothing(
    limited: InProcessGateway, issuer: TokenIssuer
) -> None:
    ws = fresh_workspace()
    token = agent_token(issuer, ws, sub="busy-" + uuid.uuid4().hex[:6])
    reader = agent_token(issuer, ws, sub="reader-" + uuid.uuid4().hex[:6])
    async with limited.mcp_client(token) as client:
        version = 0
        for step in range(LIMIT):
            err, body = await call(
                client,
                "update_state",
                uri=f"bb://{ws}/notes/n",
                digest=f"step {step}",
                body="",
                expect_version=version,
            )
            assert not err, body
            version = body["version"]
        err, body = await call(
            client,
            "update_state",
            uri=f"bb://{ws}/notes/n",
            digest="one too many",
            body="",
            expect_version=version,
        )
        assert err and body["error"]["code"] == "rate_limited", body
        assert body["error"]["retry_after"] > 0
    async with limited.mcp_client(reader) as client:
        err, body = await call(client, "get_state", uris=[f"bb://{ws}/notes/n"])
    assert not err, body
    assert (body["items"][0]["version"], body["items"][0]["digest"]) == (LIMIT, "step 4")


async def test_listing_and_search_are_refused_to_a_revoked_token_and_counted_against_the_limit(
    limited: InProcessGateway, issuer: TokenIssuer
) -> None:
    # list_keys and search_keys are admitted in a round trip of their own, before the
    # handler (the other three carry the check in their first round trip): the same verdicts.
    ws = fresh_workspace()
    sub = "lister-" + uuid.uuid4().hex[:6]
    writer = agent_token(issuer, ws, sub="writer-" + uuid.uuid4().hex[:6])
    async with limited.mcp_client(writer) as client:
        err, body = await call(
            client, "update_state", uri=f"bb://{ws}/notes/n", digest="otters", body=""
        )
        assert not err, body
    stolen = agent_token(issuer, ws, sub=sub)
    assert (
        await revoke(limited, admin_token(issuer, ws), {"id": token_id(stolen)})
    ).status_code == 200
    async with limited.mcp_client(stolen) as client:
        for tool, arguments in (
            ("list_keys", {"topic": "notes"}),
            ("search_keys", {"q": "otters"}),
        ):
            err, body = await call(client, tool, **arguments)
            assert err and body["error"]["code"] == "unauthenticated", (tool, body)
    # The replacement's budget is whole (the revoked calls spent none of it), and each
    # listing or search spends one call of it.
    replacement = agent_token(issuer, ws, sub=sub)
    async with limited.mcp_client(replacement) as client:
        for step in range(LIMIT):
            if step % 2:
                err, body = await call(client, "search_keys", q="otters")
                assert not err and [i["uri"] for i in body["items"]] == [f"bb://{ws}/notes/n"]
            else:
                err, body = await call(client, "list_keys", topic="notes")
                assert not err and [i["uri"] for i in body["items"]] == [f"bb://{ws}/notes/n"]
        for tool, arguments in (
            ("list_keys", {"topic": "notes"}),
            ("search_keys", {"q": "otters"}),
        ):
            err, body = await call(client, tool, **arguments)
            assert err and body["error"]["code"] == "rate_limited", (tool, body)
            assert body["error"]["retry_after"] > 0


async def test_the_listeners_batch_check_and_the_per_call_check_agree_on_every_kind_of_revocation(
    redis_url: str,
) -> None:
    # Open listeners are checked many tokens to a script (RedisRevocationList.revoked_among),
    # calls one token at a time in the admission script: the same rule written twice, so
    # every case of it is asked of both.
    ws = fresh_workspace()
    board = Board.from_url(redis_url)
    try:
        await board.start()
        revocations = RedisRevocationList(client=board.redis.routed)
        admission = RedisCallAdmission(
            redis=board.redis,
            limiter=RedisRateLimiter(client=board.redis.routed, per_minute=0),
        )
        now = time.time()

        def grant(subject: str, token_id: str, *, iat: float, chain: tuple[str, ...] = ()) -> Grant:
            return Grant(
                subject,
                ws,
                ("*",),
                ("*",),
                frozenset(),
                frozenset(),
                token_id,
                iat,
                now + 3600,
                delegation=tuple((f"parent-{a}", a) for a in chain),
            )

        expected = {
            "plain": (grant("ann", "plain", iat=now), False),
            "marked": (grant("ann", "marked", iat=now), True),
            "subject-after": (grant("bob", "subject-after", iat=now - 100), True),
            "subject-same-second": (grant("bob", "subject-same-second", iat=now - 10), True),
            "subject-before": (grant("bob", "subject-before", iat=now + 100), False),
            "recorded": (grant("bob", "recorded", iat=now - 100), False),
            "recorded-marked": (grant("bob", "recorded-marked", iat=now - 100), True),
            "parent-marked": (grant("cat", "parent-marked", iat=now, chain=("p1", "marked")), True),
            "parents-fine": (grant("cat", "parents-fine", iat=now, chain=("p1", "p2")), False),
            "ünïcode-☃": (grant("dee", "ünïcode-☃", iat=now), True),
        }
        for token_id in ("marked", "recorded-marked", "ünïcode-☃"):
            await revocations.revoke_token(ws, token_id, until=now + 600)
        await revocations.revoke_subject(ws, "bob", issued_before=now - 10, until=now + 600)
        # On record: issued by the board, so only a mark of its own revokes it.
        await board.client.hset(
            f"bbtk:{{{ws}}}", mapping={"recorded": "{}", "recorded-marked": "{}"}
        )
        grants = [g for g, _ in expected.values()]
        among = await revocations.revoked_among(grants)
        assert among == {token_id for token_id, (_, revoked) in expected.items() if revoked}
        for token_id, (token, revoked) in expected.items():
            assert (await admission.admit(token)).revoked is revoked, token_id
            assert await revocations.is_revoked(token) is revoked, token_id
        # Past one script's worth of tokens, in as many scripts as it takes.
        many = [grant("eve", f"many-{n}", iat=now) for n in range(450)]
        await revocations.revoke_token(ws, "many-333", until=now + 600)
        assert await revocations.revoked_among([*many, *grants]) == {"many-333", *among}
    finally:
        await board.close()
