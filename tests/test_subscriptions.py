"""subscriptions/listen: change notifications from the change log, across gateway processes.

Two real gateway processes share the session's Redis: writes go through one (A, the session
gateway), listeners sit on the other (B), so a notification can only have come through
Redis. B is started with small limits so that the bounds can be reached, once with streams
written by the direct path and once by the SDK.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from mcp.client.subscriptions import (
    ResourcesListChanged,
    ResourceUpdated,
    Subscription,
    SubscriptionLost,
)
from mcp.shared.exceptions import MCPError
from support import (
    GatewayProcess,
    admin_token,
    agent_token,
    call,
    mcp_client,
    start_gateway,
    stop_gateway,
)

from blackboard_mcp.auth import Grant, RevocationList, TokenIssuer, TokenRevoked
from blackboard_mcp.gateway.listening._hub import (
    RECHECK_SECONDS,
    ChangeHub,
    Interest,
    Listener,
    Listing,
    Notice,
)
from blackboard_mcp.store import (
    Board,
    Change,
    EmbeddedRedis,
    ListKeys,
    RedisAuditLog,
    SingleRedis,
    UpdateState,
    board_client,
)
from blackboard_mcp.testing import LISTEN_VERSION, listen_request

PER_TOKEN = 2
# How long a stopping gateway gives open streams before it cuts them (_uvicorn_adapter.py).
STOP_SECONDS = 5
QUEUE = 128


# Each behaviour holds on both ways a stream is written: the direct one and the SDK's.
@pytest.fixture(scope="module", params=["direct", "sdk"])
def gateway_b(
    request: pytest.FixtureRequest,
    redis_server: EmbeddedRedis,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    process = start_gateway(
        redis_server.url,
        tmp_path_factory.mktemp("gateway-b"),
        extra_env={
            "BB_LISTENERS_PER_TOKEN": str(PER_TOKEN),
            "BB_LISTENER_QUEUE": str(QUEUE),
            "BB_DIRECT_TOOL_CALLS": "true" if request.param == "direct" else "false",
        },
    )
    yield process
    stop_gateway(process)


def addr(ws: str, rest: str) -> str:
    return f"bb://{ws}/{rest}"


async def next_uri(sub: Subscription, seconds: float = 10.0) -> str:
    with anyio.fail_after(seconds):
        event = await sub.__anext__()
    assert isinstance(event, ResourceUpdated)
    return event.uri


async def nothing_within(sub: Subscription, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        await sub.__anext__()
        return False
    return True


async def test_a_write_through_one_gateway_notifies_a_listener_on_another(
    gateway: GatewayProcess, gateway_b: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    async with (
        mcp_client(gateway.mcp_url, token) as writer,
        mcp_client(gateway_b.mcp_url, token) as listener,
        listener.listen(
            resource_subscriptions=[addr(workspace, "facts/a"), addr(workspace, "plans")]
        ) as sub,
    ):
        await call(writer, "update_state", uri=addr(workspace, "facts/a"), digest="A.", body="")
        assert await next_uri(sub) == addr(workspace, "facts/a")
        await call(writer, "update_state", uri=addr(workspace, "facts/other"), digest="O.", body="")
        await call(writer, "update_state", uri=addr(workspace, "plans/p/1"), digest="P.", body="")
        # A note nobody follows gives no event; any note of a followed topic does.
        assert await next_uri(sub) == addr(workspace, "plans/p/1")
        await call(
            writer,
            "link_state",
            src=addr(workspace, "facts/a"),
            rel="cites",
            dst=[addr(workspace, "plans/p/1")],
        )
        assert await next_uri(sub) == addr(workspace, "facts/a")


async def test_no_event_reveals_an_unreadable_topic(
    gateway: GatewayProcess, gateway_b: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    reader = agent_token(issuer, workspace, read=["facts"], write=[], caps=["board_read"])
    async with (
        mcp_client(gateway.mcp_url, agent_token(issuer, workspace)) as writer,
        mcp_client(gateway_b.mcp_url, reader) as listener,
    ):
        with pytest.raises(MCPError) as refused:
            async with listener.listen(resource_subscriptions=[addr(workspace, "secret")]):
                pass
        assert refused.value.error.data["code"] == "forbidden"
        with pytest.raises(MCPError) as foreign:
            async with listener.listen(resource_subscriptions=["bb://other-ws/facts"]):
                pass
        assert foreign.value.error.data["code"] == "forbidden"
        async with listener.listen(resource_subscriptions=[addr(workspace, "facts")]) as sub:
            await call(
                writer, "update_state", uri=addr(workspace, "secret/x"), digest="S.", body=""
            )
            await call(writer, "update_state", uri=addr(workspace, "facts/y"), digest="Y.", body="")
            assert await next_uri(sub) == addr(workspace, "facts/y")
            assert await nothing_within(sub, 0.5)


async def test_listeners_per_token_are_bounded(
    gateway_b: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    follow = [addr(workspace, "facts")]
    async with mcp_client(gateway_b.mcp_url, token) as client:
        async with (
            client.listen(resource_subscriptions=follow),
            client.listen(resource_subscriptions=follow),
        ):
            with pytest.raises(MCPError) as refused:
                async with client.listen(resource_subscriptions=follow):
                    pass
            assert refused.value.error.data["code"] == "rate_limited"
            assert "BB_LISTENERS_PER_TOKEN" in refused.value.error.data["hint"]
            # Another token of the same agent has its own allowance.
            other = agent_token(issuer, workspace)
            async with (
                mcp_client(gateway_b.mcp_url, other) as second,
                second.listen(resource_subscriptions=follow),
            ):
                pass
        # Closed listeners give their places back, once the gateway has seen them close.
        await _listen_once_allowed(client, follow)


async def _listen_once_allowed(client: Any, follow: list[str]) -> None:
    """Open a listen and close it, tried again while the gateway still counts listeners its
    client has just closed (it learns of a close when their connections end)."""
    for _ in range(100):
        try:
            async with client.listen(resource_subscriptions=follow):
                return
        except* MCPError as refused:
            if not all(e.error.data["code"] == "rate_limited" for e in refused.exceptions):
                raise
        await anyio.sleep(0.05)
    raise AssertionError("the gateway still counts listeners closed five seconds ago")


def _raw_listen(url: str, token: str, uris: list[str]) -> socket.socket:
    """A listen whose client then stops reading, with a small receive buffer so that the
    server's writes back up soon."""
    parts = urlsplit(url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname, parts.port))
    sock.sendall(listen_request(parts.netloc, parts.path, token, uris, client="slow"))
    sock.settimeout(10)
    first = sock.recv(4096)
    assert b" 200 " in first.split(b"\r\n", 1)[0], first
    return sock


@pytest.fixture
async def writer_board(redis_server: EmbeddedRedis) -> AsyncIterator[Board]:
    board = Board(client=board_client(redis_server.url))
    yield board
    await board.close()


async def test_a_slow_listener_is_dropped_without_holding_up_the_others(
    gateway_b: GatewayProcess, issuer: TokenIssuer, workspace: str, writer_board: Board
) -> None:
    follow = [addr(workspace, "flood")]
    dropped_before = _dropped_streams(gateway_b)
    slow = _raw_listen(gateway_b.mcp_url, agent_token(issuer, workspace), follow)
    # Long addresses fill the slow client's buffers in fewer writes.
    stem = "/".join(["s" * 100] * 4)
    try:
        async with (
            mcp_client(gateway_b.mcp_url, agent_token(issuer, workspace)) as fast_client,
            fast_client.listen(resource_subscriptions=follow) as fast,
        ):
            seen: set[str] = set()

            async def drain() -> None:
                async for event in fast:
                    assert isinstance(event, ResourceUpdated)
                    seen.add(event.uri)

            async with anyio.create_task_group() as tg:
                tg.start_soon(drain)
                n = 0
                written: list[str] = []
                deadline = time.monotonic() + 60
                while "overloaded" not in Path(gateway_b.log_path).read_text(errors="replace"):
                    assert time.monotonic() < deadline, "the slow listener was never dropped"
                    batch = [addr(workspace, f"flood/{stem}/{n + i}") for i in range(50)]
                    written += batch
                    await asyncio.gather(
                        *(
                            writer_board.update_state(
                                UpdateState.parse({"uri": u, "digest": "d", "body": ""}), author="w"
                            )
                            for u in batch
                        )
                    )
                    n += 50
                    # The fast listener keeps up batch by batch (on a busy machine a flood
                    # could otherwise outrun a reader that is not slow), while the slow one
                    # reads nothing; a fast listener dropped would never see the batch.
                    with anyio.fail_after(10):
                        while not seen.issuperset(batch):
                            await anyio.sleep(0.01)
                # The fast listener still hears about every write after the drop, promptly.
                last = addr(workspace, f"flood/{stem}/last")
                await writer_board.update_state(
                    UpdateState.parse({"uri": last, "digest": "d", "body": ""}), author="w"
                )
                written.append(last)
                with anyio.fail_after(10):
                    while last not in seen:
                        await anyio.sleep(0.02)
                tg.cancel_scope.cancel()
        # Once the slow client reads again, its stream ends with the drop's error.
        sock_data = b""
        slow.settimeout(10)
        while not sock_data.endswith(b"\r\n0\r\n\r\n"):  # the response's last chunk
            chunk = slow.recv(1 << 20)
            assert chunk, sock_data[-500:]
            sock_data += chunk
        events = _messages(sock_data)
        error = events[-1]["error"]["data"]
        assert error["code"] == "overloaded" and "re-listen" in error["hint"]
        heard = [e["params"]["uri"] for e in events if "params" in e and "uri" in e["params"]]
        # The error says where to catch up from: what the client heard, and one listing of
        # the changes after that cursor, together miss nothing; what it heard first is not
        # listed again.
        caught_up: list[str] = []
        cursor = error["cursor"]
        for _ in range(100):
            page = await writer_board.list_keys(
                ListKeys.parse({"topic": "flood", "cursor": cursor, "mode": "ref", "limit": 200}),
                workspace=workspace,
            )
            caught_up += [item["uri"] for item in page["items"]]
            cursor = page["cursor"]
            if "next" not in page:
                break
        assert heard and heard[0] not in caught_up
        assert set(written) <= set(heard) | set(caught_up)
        # Operators see the drop in /metrics, once.
        assert _dropped_streams(gateway_b) == dropped_before + 1
    finally:
        slow.close()


def _messages(stream: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of the SSE events in ``stream`` (each event's one data line)."""
    return [
        json.loads(line[len(b"data: ") :])
        for line in stream.split(b"\r\n")
        if line.startswith(b"data: ")
    ]


def _dropped_streams(gateway: GatewayProcess) -> float:
    text = httpx.get(gateway.url + "/metrics").text
    (value,) = re.findall(r"^bb_listeners_dropped_total (\S+)$", text, re.MULTILINE)
    return float(value)


# A gateway whose pump reads the change log at most every 50 ms under a burst with one
# listener: min(75 ms, 1 listener / 20 writes a second).
PACED_READ_SECONDS = 0.05


def _chunks(stream: bytes) -> tuple[list[bytes], bytes]:
    """The whole HTTP chunks at the start of ``stream`` (past its headers), and the rest."""
    chunks: list[bytes] = []
    while True:
        line_end = stream.find(b"\r\n")
        if line_end < 0:
            return chunks, stream
        size = int(stream[:line_end], 16)
        end = line_end + 2 + size + 2
        if len(stream) < end:
            return chunks, stream
        chunks.append(stream[line_end + 2 : end - 2])
        stream = stream[end:]


async def test_a_burst_reaches_a_stream_in_one_write_per_read_of_the_change_log(
    redis_server: EmbeddedRedis,
    issuer: TokenIssuer,
    workspace: str,
    writer_board: Board,
    tmp_path: Path,
) -> None:
    paced = start_gateway(
        redis_server.url, tmp_path / "paced", extra_env={"BB_LISTENER_WRITES_PER_SECOND": "20"}
    )
    parts = urlsplit(paced.mcp_url)
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        follow = [addr(workspace, "burst")]
        token = agent_token(issuer, workspace)
        writer.write(listen_request(parts.netloc, parts.path, token, follow, client="paced"))
        stream = b""
        with anyio.fail_after(10):
            while b"\r\n\r\n" not in stream or b"acknowledged" not in stream:
                stream += await reader.read(1 << 16)
        stream = stream.split(b"\r\n\r\n", 1)[1]
        uris = [addr(workspace, f"burst/{n:03d}") for n in range(100)]
        started = time.monotonic()
        for uri in uris:
            await writer_board.update_state(
                UpdateState.parse({"uri": uri, "digest": "d", "body": ""}), author="w"
            )
        took = time.monotonic() - started
        heard: list[str] = []
        writes = 0
        with anyio.fail_after(10):
            while len(heard) < len(uris):
                stream += await reader.read(1 << 16)
                chunks, stream = _chunks(stream)
                for chunk in chunks:
                    events = _messages(chunk)
                    updates = [
                        e["params"]["uri"]
                        for e in events
                        if e.get("method") == "notifications/resources/updated"
                    ]
                    writes += bool(updates)
                    heard += updates
        # Every change once, in the order written, and no more writes than the pump made
        # reads: one per interval while the writes went on, one the moment the first came,
        # and one for what came in the last interval.
        assert heard == uris
        assert writes <= took / PACED_READ_SECONDS + 3, (writes, took)
    finally:
        writer.close()
        stop_gateway(paced)


@pytest.mark.slow
async def test_a_gateway_with_open_listeners_stops_promptly(
    redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str, tmp_path: Path
) -> None:
    process = start_gateway(redis_server.url, tmp_path / "gateway-stop")
    try:
        async with (
            mcp_client(process.mcp_url, agent_token(issuer, workspace)) as client,
            client.listen(resource_subscriptions=[addr(workspace, "facts")]) as sub,
        ):
            started = time.monotonic()
            process.process.send_signal(signal.SIGINT)
            with anyio.fail_after(40):
                try:
                    async for _event in sub:
                        pass
                except SubscriptionLost:
                    pass  # an abrupt end is allowed: the client re-listens elsewhere
                while process.process.poll() is None:
                    await anyio.sleep(0.05)
            assert process.process.returncode == 0, process.log_text()
            # Generous: this machine is shared; the failure this guards against is for ever.
            assert time.monotonic() - started < STOP_SECONDS + 15, process.log_text()
    finally:
        stop_gateway(process)


async def test_a_listen_ends_when_its_token_expires(
    gateway_b: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, ttl=2)
    async with (
        mcp_client(gateway_b.mcp_url, token) as client,
        client.listen(resource_subscriptions=[addr(workspace, "facts")]) as sub,
    ):
        with anyio.fail_after(10):
            events = [event async for event in sub]  # ends gracefully at expiry
    assert events == []


async def test_a_revoked_token_stops_hearing_of_changes(
    gateway: GatewayProcess, gateway_b: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    listener_token = agent_token(issuer, workspace, sub="listener")
    async with (
        mcp_client(gateway.mcp_url, agent_token(issuer, workspace)) as writer,
        mcp_client(gateway_b.mcp_url, listener_token) as client,
        client.listen(resource_subscriptions=[addr(workspace, "facts")]) as sub,
    ):
        async with httpx.AsyncClient() as http:
            revoked = await http.post(
                gateway.url + "/admin/revoke",
                # Made with the key, not issued through the board: not on record, so forced.
                json={"sub": "listener", "force": True},
                headers={"Authorization": f"Bearer {admin_token(issuer, workspace)}"},
            )
        assert revoked.status_code == 200, revoked.text
        # Within the recheck interval (5 s) the stream ends with `unauthenticated`, and no
        # change written after the revocation reaches it.
        started = time.monotonic()
        seen: list[str] = []
        with pytest.raises(SubscriptionLost) as lost, anyio.fail_after(20):
            while True:
                await call(
                    writer, "update_state", uri=addr(workspace, "facts/x"), digest="X.", body=""
                )
                with anyio.move_on_after(0.5):
                    event = await sub.__anext__()
                    assert isinstance(event, ResourceUpdated)
                    seen.append(event.uri)
        assert time.monotonic() - started < 12
        cause = lost.value.__cause__
        assert isinstance(cause, MCPError) and cause.error.data["code"] == "unauthenticated"


async def test_a_listen_is_audited_as_a_listen_of_the_addresses_it_names(
    gateway: GatewayProcess, redis_server: EmbeddedRedis, issuer: TokenIssuer, workspace: str
) -> None:
    reader = agent_token(issuer, workspace, read=["facts"], write=[], caps=["board_read"])
    follows = [addr(workspace, "facts/a"), addr(workspace, "facts")]
    async with mcp_client(gateway.mcp_url, reader) as listener:
        async with listener.listen(resource_subscriptions=follows):
            pass
        with pytest.raises(MCPError):
            async with listener.listen(resource_subscriptions=[addr(workspace, "secret")]):
                pass
    client = board_client(redis_server.url)
    try:
        log = RedisAuditLog(redis=SingleRedis(client), maxlen=1000)
        records = []
        for _ in range(50):  # the gateway writes its audit records in the background
            records = (await log.tail(workspace, 10))[::-1]  # newest first: turn it
            if len(records) >= 2:
                break
            await asyncio.sleep(0.1)
    finally:
        await client.aclose()
    assert [(r.tool, r.outcome, r.addresses) for r in records] == [
        ("subscriptions/listen", "ok", tuple(follows)),
        ("subscriptions/listen", "forbidden", (addr(workspace, "secret"),)),
    ]


async def _feed_uris(lines: AsyncIterator[str], until: str) -> list[str]:
    """The addresses of the board page's feed events, read until one names ``until``."""
    seen: list[str] = []
    async for line in lines:
        if line.startswith("data: "):
            seen.append(json.loads(line[len("data: ") :])["uri"])
            if seen[-1] == until:
                return seen
    return seen


async def test_feeds_of_tokens_that_read_different_topics_each_hear_only_their_own(
    gateway: GatewayProcess, gateway_b: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    # Alike listeners share one match of each change; tokens that read other topics must not,
    # whichever of them joined first.
    wide = admin_token(issuer, workspace)
    narrow = agent_token(issuer, workspace, read=["pub"], write=[], caps=["board_read"])
    url = gateway_b.url + "/board/api/events"
    async with (
        mcp_client(gateway.mcp_url, agent_token(issuer, workspace)) as writer,
        httpx.AsyncClient(timeout=30) as http,
        http.stream("GET", url, headers={"authorization": f"Bearer {wide}"}) as wide_feed,
        http.stream("GET", url, headers={"authorization": f"Bearer {narrow}"}) as narrow_feed,
    ):
        assert wide_feed.status_code == narrow_feed.status_code == 200
        wide_lines, narrow_lines = wide_feed.aiter_lines(), narrow_feed.aiter_lines()
        # Both are listening once their first line came.
        for lines in (wide_lines, narrow_lines):
            with anyio.fail_after(10):
                await lines.__anext__()
        await call(writer, "update_state", uri=addr(workspace, "secret/x"), digest="S.", body="")
        await call(writer, "update_state", uri=addr(workspace, "pub/y"), digest="Y.", body="")
        with anyio.fail_after(10):
            heard_wide = await _feed_uris(wide_lines, addr(workspace, "pub/y"))
            heard_narrow = await _feed_uris(narrow_lines, addr(workspace, "pub/y"))
    assert heard_wide == [addr(workspace, "secret/x"), addr(workspace, "pub/y")]
    assert heard_narrow == [addr(workspace, "pub/y")]


def test_listeners_alike_share_one_bounded_log_and_a_laggard_is_dropped_alone() -> None:
    grant = Grant("a", "ws", ("*",), (), frozenset(), frozenset(), "t", 0.0, 1e12)
    interest = Interest(grant, frozenset(), None, limit=4)
    fast, slow = (Listener(grant, interest) for _ in range(2))
    dropped: list[Listener] = []
    for listener in (fast, slow):
        interest.listeners[listener] = None
        listener.on_drop = lambda listener=listener: dropped.append(listener)
    read: list[str] = []
    for n in range(40):
        change = Change("ws", "t", n, "write", f"bb://ws/t/{n}", 1, "a", 0)
        interest.publish(Notice.of(change))
        read += [notice.change.uri for notice in interest.read(fast, 10)]
        # However far behind the slow one is, the shared log never holds more than twice
        # the limit, once for all the listeners.
        assert len(interest.log) < 2 * interest.limit
    assert read == [f"bb://ws/t/{n}" for n in range(40)]
    assert dropped == [slow] and slow.dropped and not fast.dropped
    assert interest.read(slow, 10) == []
    # It took nothing: it catches up from before the first change it was due.
    assert slow.resume_after == -1


async def test_an_idle_listener_waits_again_and_again_without_growing_anything() -> None:
    grant = Grant("a", "ws", ("*",), (), frozenset(), frozenset(), "t", 0.0, 1e12)
    interest = Interest(grant, frozenset(), None, limit=4)
    listener = Listener(grant, interest)
    interest.listeners[listener] = None
    # A quiet stream wakes every few seconds (keep-alives, the revocation check) to wait
    # again: each wait must not leave one more entry behind.
    for _ in range(50):
        assert not await listener.wait(0)
    assert len(interest.sleepers) <= 1
    change = Change("ws", "t", 1, "write", "bb://ws/t/k", 1, "a", 0)
    interest.publish(Notice.of(change))
    assert await listener.wait(0) and interest.sleepers == []


async def test_a_wait_ends_on_time_though_the_wait_before_it_was_longer() -> None:
    grant = Grant("a", "ws", ("*",), (), frozenset(), frozenset(), "t", 0.0, 1e12)
    interest = Interest(grant, frozenset(), None, limit=4)
    listener = Listener(grant, interest)
    interest.listeners[listener] = None
    # A long wait ended by a change leaves its timer for the next wait; a shorter wait after
    # it must not wait for that timer.
    waiting = asyncio.create_task(listener.wait(3600))
    await asyncio.sleep(0)
    interest.publish(Notice.of(Change("ws", "t", 1, "write", "bb://ws/t/k", 1, "a", 0)))
    assert await waiting
    assert [n.change.uri for n in interest.read(listener, 10)] == ["bb://ws/t/k"]
    assert not await asyncio.wait_for(listener.wait(0), timeout=10)


class _FloodedFeed:
    """A change log that holds two full reads and then a few entries more, and then
    nothing: ``next`` then waits until the test ends."""

    def __init__(self, batches: list[int]) -> None:
        self._batches = batches
        self._seq = 0

    async def start_now(self) -> None:
        pass

    async def next(self, *, block_ms: int, count: int) -> list[Change]:
        if not self._batches:
            await asyncio.Event().wait()
        size = min(self._batches.pop(0), count)
        changes = [
            Change("ws", "t", self._seq + n, "write", f"bb://ws/t/{self._seq + n}", 1, "a", 0)
            for n in range(size)
        ]
        self._seq += size
        return changes

    async def close(self) -> None:
        pass


class _FloodedBoard:
    def __init__(self, feed: _FloodedFeed) -> None:
        self._feed = feed

    async def open_feed(self, workspace: str) -> _FloodedFeed:
        return self._feed


async def test_the_pump_reads_again_at_once_after_a_full_read_so_it_never_falls_behind() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    feed = _FloodedFeed([10_000, 10_000, 3])
    hub = ChangeHub(
        cast(Board, _FloodedBoard(feed)),
        revocations=cast(RevocationList, None),
        per_token=1,
        queue_size=2048,
        writes_per_second=20,
        sleep=sleep,
    )
    grant = Grant("a", "ws", ("*",), (), frozenset(), frozenset(), "t", 0.0, 1e12)
    listener = await hub.join(grant, notes=frozenset(), topics=None)
    try:
        for _ in range(100):
            if listener.interest.head == 2 * 512 + 3:
                break
            await asyncio.sleep(0)
        assert listener.interest.head == 2 * 512 + 3
        # Paced once, after the read that was not full; never between the full ones.
        assert slept == [hub.write_interval()]
    finally:
        await hub.close()


async def test_a_listen_without_resources_is_acknowledged_with_what_is_honoured(
    gateway_b: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    # 2026-07-28: every filter member is optional; the acknowledgement says which the server
    # honours. The tool list never changes, so asking to hear of it is honoured (nothing will
    # come); a note or topic is followed as before, in the same listen.
    async with (
        mcp_client(gateway_b.mcp_url, agent_token(issuer, workspace)) as client,
        client.listen(tools_list_changed=True) as only_tools,
    ):
        assert only_tools.honored.tools_list_changed is True
        assert not only_tools.honored.resource_subscriptions
        assert await nothing_within(only_tools, 0.2)
        async with client.listen(
            tools_list_changed=True, resource_subscriptions=[addr(workspace, "facts")]
        ) as both:
            assert both.honored.tools_list_changed is True
            assert both.honored.resource_subscriptions == [addr(workspace, "facts")]
            await call(client, "update_state", uri=addr(workspace, "facts/z"), digest="Z.", body="")
            assert await next_uri(both) == addr(workspace, "facts/z")


async def _next_event(sub: Subscription, seconds: float = 10.0) -> object:
    with anyio.fail_after(seconds):
        return await sub.__anext__()


async def test_a_listen_asking_for_the_resource_list_hears_when_what_resources_list_offers_changes(
    gateway: GatewayProcess,
    gateway_b: GatewayProcess,
    issuer: TokenIssuer,
    workspace: str,
    writer_board: Board,
) -> None:
    # resources/list offers the catch-up note once it exists, and the topics the token may
    # read that have notes: a list_changed comes when that changes, and only then. The
    # followed topic's updates mark where the stream is, so an event that should not have
    # come would be seen before the next mark.
    reader = agent_token(issuer, workspace, read=["facts", "plans"], write=[], caps=["board_read"])
    catch_up = addr(workspace, "run/state/current")
    async with mcp_client(gateway.mcp_url, agent_token(issuer, workspace)) as writer:
        await call(writer, "update_state", uri=addr(workspace, "facts/a"), digest="A.", body="")
        async with (
            mcp_client(gateway_b.mcp_url, reader) as listener,
            listener.listen(
                resources_list_changed=True, resource_subscriptions=[addr(workspace, "facts")]
            ) as sub,
        ):
            assert sub.honored.resources_list_changed is True

            async def mark(key: str) -> None:
                await call(
                    writer,
                    "update_state",
                    uri=addr(workspace, f"facts/{key}"),
                    digest="M.",
                    body="",
                )
                assert await _next_event(sub) == ResourceUpdated(addr(workspace, f"facts/{key}"))

            # A topic the token may not read, and a note of a topic already listed: the
            # list it is offered stays the same.
            await call(
                writer, "update_state", uri=addr(workspace, "secret/x"), digest="S.", body=""
            )
            await call(
                writer, "update_state", uri=addr(workspace, "run/notes"), digest="R.", body=""
            )
            await mark("b")
            # A topic it may read appears.
            await call(writer, "update_state", uri=addr(workspace, "plans/p"), digest="P.", body="")
            assert await _next_event(sub) == ResourcesListChanged()
            await call(writer, "update_state", uri=addr(workspace, "plans/q"), digest="Q.", body="")
            await mark("c")
            # The catch-up note comes into being (every reader's, whatever its topics); a
            # later version of it changes nothing listed.
            await call(writer, "update_state", uri=catch_up, digest="Start here.", body="")
            assert await _next_event(sub) == ResourcesListChanged()
            await call(
                writer, "update_state", uri=catch_up, digest="Then here.", body="", expect_version=1
            )
            await mark("d")
            listed = await listener.list_resources()
            assert sorted(r.uri for r in listed.resources) == [
                addr(workspace, "facts"),
                addr(workspace, "plans"),
                catch_up,
            ]
            # A topic's last note going, and the catch-up note going, change it again; a note
            # of a topic that keeps others does not.
            await writer_board.delete(
                author="w", workspace=workspace, uri=addr(workspace, "plans/p")
            )
            await mark("e")
            await writer_board.delete(
                author="w", workspace=workspace, uri=addr(workspace, "plans/q")
            )
            assert await _next_event(sub) == ResourcesListChanged()
            await writer_board.delete(author="w", workspace=workspace, uri=catch_up)
            assert await _next_event(sub) == ResourcesListChanged()
            await mark("f")


async def _sse_messages(
    url: str, token: str, notifications: dict[str, Any], request_id: str
) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of a raw subscriptions/listen stream, as they come."""
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "subscriptions/listen",
        "params": {
            "notifications": notifications,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": LISTEN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            },
        },
    }
    headers = {
        "authorization": f"Bearer {token}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": LISTEN_VERSION,
        "mcp-method": "subscriptions/listen",
    }
    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream("POST", url, json=body, headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                yield json.loads(line[len("data: ") :])


async def test_a_resource_list_change_is_tagged_and_told_only_to_a_listen_that_asks(
    gateway: GatewayProcess, gateway_b: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    # resourceSubscriptions is optional: a listen may ask for the list's changes alone. One
    # that follows the topic without asking hears its note, and no list change.
    token = agent_token(issuer, workspace)
    lists = _sse_messages(gateway_b.mcp_url, token, {"resourcesListChanged": True}, "lists")
    follows = _sse_messages(
        gateway_b.mcp_url, token, {"resourceSubscriptions": [addr(workspace, "facts")]}, "notes"
    )
    with anyio.fail_after(10):
        ack = await lists.__anext__()
        follow_ack = await follows.__anext__()
    tag = {"io.modelcontextprotocol/subscriptionId": "lists"}
    assert ack["method"] == follow_ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {"notifications": {"resourcesListChanged": True}, "_meta": tag}
    assert "resourcesListChanged" not in follow_ack["params"]["notifications"]
    async with mcp_client(gateway.mcp_url, agent_token(issuer, workspace)) as writer:
        await call(writer, "update_state", uri=addr(workspace, "facts/a"), digest="A.", body="")
        await call(writer, "update_state", uri=addr(workspace, "facts/b"), digest="B.", body="")
        with anyio.fail_after(10):
            changed = await lists.__anext__()
            heard = [await follows.__anext__() for _ in range(2)]
    await lists.aclose()
    await follows.aclose()
    assert changed == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/list_changed",
        "params": {"_meta": tag},
    }
    assert [(m["method"], m["params"]["uri"]) for m in heard] == [
        ("notifications/resources/updated", addr(workspace, "facts/a")),
        ("notifications/resources/updated", addr(workspace, "facts/b")),
    ]


class _ListedBoard:
    """A board whose topics with notes, and whether its catch-up note exists, are what the
    test sets; each look at them can be held until the test lets it answer."""

    def __init__(self, topics: set[str], *, catch_up: bool = False) -> None:
        self.now = topics
        self.catch_up = catch_up
        self.looks = 0
        self.gate: asyncio.Event | None = None

    async def topics(self, *, workspace: str, readable: Any) -> list[tuple[str, int]]:
        self.looks += 1
        seen = set(self.now)
        if self.gate is not None:
            await self.gate.wait()
        return [(t, 1) for t in sorted(seen) if readable(t)]

    async def get_state(self, request: Any) -> dict[str, Any]:
        item = {"uri": "bb://ws/run/state/current"} if self.catch_up else {"error": {}}
        return {"items": [item]}


def _change(op: str, uri: str, seq: int = 1, version: int = 1) -> Change:
    return Change("ws", uri.split("/")[3], seq, op, uri, version, "a", 0)


async def test_a_topic_emptied_and_filled_again_within_one_read_is_told_as_changed() -> None:
    board = _ListedBoard({"facts"})
    listing = Listing(cast(Board, board), "ws")
    await listing.load()
    # By the time the read is seen, the topic has a note again: what a client listed in
    # between may have lacked it (or the topic kept other notes: told all the same).
    told = await listing.follow(
        [_change("delete", "bb://ws/facts/a"), _change("create", "bb://ws/facts/b", 2)]
    )
    assert told == [("facts",), ("facts",)]
    # A note gone from a topic that keeps others, or a note written into a listed topic,
    # changes nothing listed.
    assert await listing.follow([_change("delete", "bb://ws/facts/b", 3)]) == [()]
    assert await listing.follow([_change("create", "bb://ws/facts/c", 4)]) == [()]


async def test_a_delete_read_while_the_list_loads_makes_it_load_again() -> None:
    board = _ListedBoard({"facts", "plans"})
    board.gate = asyncio.Event()
    listing = Listing(cast(Board, board), "ws")
    loading = asyncio.create_task(listing.load())
    for _ in range(100):
        if board.looks:
            break
        await asyncio.sleep(0)
    assert board.looks == 1
    # The first look saw plans; its last note goes before the look answers.
    board.now = {"facts"}
    assert await listing.follow([_change("delete", "bb://ws/plans/p")]) == [()]
    board.gate.set()
    await loading
    assert board.looks == 2 and listing.topics == {"facts"}
    # So plans getting a note again is a change.
    assert await listing.follow([_change("create", "bb://ws/plans/q", 2)]) == [("plans",)]


class _CountingRevocations:
    """Revokes the tokens named; records each question it is asked."""

    def __init__(self, revoked: set[str]) -> None:
        self.revoked = revoked
        self.asked: list[list[str]] = []

    async def revoked_among(self, grants: list[Grant]) -> set[str]:
        self.asked.append(sorted(g.token_id for g in grants))
        return {g.token_id for g in grants} & self.revoked


class _RecheckRounds:
    """The hub's recheck timer, driven by the test: each ``release`` lets one round run."""

    def __init__(self) -> None:
        self._go: asyncio.Queue[None] = asyncio.Queue()
        self.waiting = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        assert seconds == RECHECK_SECONDS
        self.waiting.set()
        await self._go.get()
        self.waiting.clear()

    async def release(self) -> None:
        self._go.put_nowait(None)
        await asyncio.sleep(0)
        with anyio.fail_after(10):
            await self.waiting.wait()  # the round ran and the next one waits


async def test_a_process_asks_once_for_all_its_listeners_tokens_and_ends_only_the_revoked_streams(
    redis_url: str,
) -> None:
    board = Board.from_url(redis_url)
    await board.start()
    revocations = _CountingRevocations({"bad"})
    rounds = _RecheckRounds()
    hub = ChangeHub(
        board,
        revocations=cast(RevocationList, revocations),
        per_token=10,
        queue_size=64,
        recheck_sleep=rounds.sleep,
    )
    ws = f"ws-{time.monotonic_ns()}"

    def grant(token_id: str) -> Grant:
        return Grant("a", ws, ("*",), (), frozenset(), frozenset(), token_id, 0.0, 1e12)

    bad, good = grant("bad"), grant("good")
    try:
        listeners = [await hub.join(g, notes=frozenset(), topics=None) for g in (bad, bad, good)]
        waits = [
            asyncio.create_task(hub.next_change(listener, wait_seconds=600))
            for listener in listeners
        ]
        with anyio.fail_after(10):
            await rounds.waiting.wait()
        assert revocations.asked == []
        await rounds.release()
        # One question for the workspace's three streams, each token asked once.
        assert revocations.asked == [["bad", "good"]]
        with anyio.fail_after(10):
            for task in waits[:2]:
                with pytest.raises(TokenRevoked):
                    await task
        assert not waits[2].done()
        for listener in listeners[:2]:
            hub.leave(listener)  # as a stream does once it ends (Listens.follow)
        # The stream that stays still hears the next change.
        await board.update_state(
            UpdateState.parse({"uri": f"bb://{ws}/t/n", "digest": "after", "body": ""}),
            author="w",
        )
        with anyio.fail_after(10):
            notice = await waits[2]
        assert isinstance(notice, Notice) and notice.change.uri == f"bb://{ws}/t/n"
        await rounds.release()
        assert revocations.asked == [["bad", "good"], ["good"]]  # the revoked ones left
    finally:
        await hub.close()
        await board.close()
