"""A busy gateway says so: calls wait their turn for a Redis connection, and past the limits the
answer is `overloaded` with ``retry_after``, never `unavailable` (which means Redis is down).

Load goes as raw concurrent POSTs, on a healthy Redis: through a real gateway process (one
connection each) where the server takes the load, and to the app in process where the point is
the gateway's own limits; the pool itself is tested on the store against the same Redis.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from app_support import InProcessGateway, in_process_gateway
from support import GatewayProcess, agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import Board, GetState, Overloaded, Unavailable, board_client, free_port

CONCURRENT_CALLS = 1000


def request(token: str, request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "headers": {
            "authorization": f"Bearer {token}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-06-18",
        },
        "content": orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        ),
    }


def mixed_calls(token: str, workspace: str, count: int) -> list[dict[str, Any]]:
    """Writes of distinct notes, reads and searches, interleaved."""
    calls = []
    for i in range(count):
        if i % 3 == 0:
            tool, arguments = (
                "update_state",
                {"uri": f"bb://{workspace}/load/n{i}", "digest": f"note {i}", "body": "b"},
            )
        elif i % 3 == 1:
            tool, arguments = "get_state", {"uris": [f"bb://{workspace}/load/n{i - 1}"]}
        else:
            tool, arguments = "search_keys", {"q": "note"}
        calls.append(request(token, i, tool, arguments))
    return calls


async def send_all(
    target: str | InProcessGateway, calls: list[dict[str, Any]]
) -> list[httpx.Response]:
    """Every call at once: to a gateway process's URL each on a connection of its own, or to
    the app in process."""
    if isinstance(target, InProcessGateway):
        return await asyncio.gather(*(target.http.post(target.mcp_url, **call) for call in calls))
    url = target
    limits = httpx.Limits(max_connections=len(calls), max_keepalive_connections=len(calls))
    async with httpx.AsyncClient(limits=limits, timeout=120.0) as http:
        return await asyncio.gather(*(http.post(url, **call) for call in calls))


def results(responses: list[httpx.Response]) -> list[dict[str, Any]]:
    assert all(r.status_code == 200 for r in responses), Counter(r.status_code for r in responses)
    return [r.json()["result"] for r in responses]


def outcome(result: dict[str, Any]) -> str:
    return str(result["structuredContent"]["error"]["code"]) if result["isError"] else "ok"


@pytest.mark.slow
async def test_a_thousand_concurrent_calls_on_a_healthy_board_all_succeed(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="load-" + uuid.uuid4().hex[:8])
    answers = results(
        await send_all(gateway.mcp_url, mixed_calls(token, workspace, CONCURRENT_CALLS))
    )
    assert Counter(outcome(a) for a in answers) == {"ok": CONCURRENT_CALLS}


@pytest.fixture(
    params=[
        {"max_in_flight": 16},
        {"redis_pool_size": 2, "redis_pool_timeout": 0.005},
    ],
    ids=["in-flight-limit", "pool-wait"],
)
async def busy_gateway(
    request: pytest.FixtureRequest, redis_url: str, tmp_path: Path
) -> AsyncIterator[InProcessGateway]:
    # The burst and the app share this process's one event loop: on a busy machine a call
    # that holds a connection can be starved past the default Redis deadline, which answers
    # unavailable for a reason that is not the limit under test. A long deadline leaves the
    # limit's own refusal (overloaded) as the only one.
    settings = {"redis_timeout_seconds": 60.0, **request.param}
    async with in_process_gateway(redis_url, tmp_path / "busy", **settings) as app:
        yield app


@pytest.mark.slow
async def test_past_a_limit_calls_are_overloaded_with_retry_after_and_never_unavailable(
    busy_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="busy-" + uuid.uuid4().hex[:8])
    # One call first, alone, so the pool's connections exist: on a loaded machine, opening
    # them inside the burst can take longer than the pool-wait case's 5 ms for every call.
    warm = results(await send_all(busy_gateway, [request(token, 0, "list_keys", {})]))
    assert outcome(warm[0]) == "ok", warm
    calls = mixed_calls(token, workspace, CONCURRENT_CALLS)
    answers = results(await send_all(busy_gateway, calls))
    outcomes = Counter(outcome(a) for a in answers)
    # On failure, which calls were refused otherwise, and with what words.
    others = [
        (i % 3, a["structuredContent"]["error"])
        for i, a in enumerate(answers)
        if outcome(a) not in ("ok", "overloaded")
    ]
    assert set(outcomes) == {"ok", "overloaded"}, (outcomes, others[:5])
    for answer in answers:
        if answer["isError"]:
            error = answer["structuredContent"]["error"]
            assert error["retry_after"] > 0 and "retry_after" in error["hint"], error
    # Every write answered ok is there; none answered overloaded is.
    written = {
        i: outcome(a) for i, a in enumerate(answers) if i % 3 == 0
    }  # mixed_calls writes n{i} for i % 3 == 0
    check = request(
        token, 0, "get_state", {"uris": [f"bb://{workspace}/load/n{i}" for i in written][:100]}
    )
    [checked] = await send_all(busy_gateway, [check])
    read = checked.json()["result"]
    assert not read["isError"], read
    for item in read["structuredContent"]["items"]:
        i = int(item["uri"].rsplit("/n", 1)[1])
        assert ("error" not in item) == (written[i] == "ok"), (item, written[i])


@pytest.fixture
async def limited_pair(redis_url: str, tmp_path: Path) -> AsyncIterator[list[InProcessGateway]]:
    """Two gateways with a tiny in-flight limit: the direct path's and the SDK's."""
    async with (
        in_process_gateway(
            redis_url, tmp_path / "direct", max_in_flight=2, direct_tool_calls=True
        ) as direct,
        in_process_gateway(
            redis_url, tmp_path / "sdk", max_in_flight=2, direct_tool_calls=False
        ) as sdk,
    ):
        yield [direct, sdk]


@pytest.mark.slow
async def test_an_overloaded_answer_is_the_same_on_the_direct_and_the_sdk_path(
    limited_pair: list[InProcessGateway], issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="pair-" + uuid.uuid4().hex[:8])
    calls = [
        request(token, 7, "get_state", {"uris": [f"bb://{workspace}/t/k"]}) for _ in range(200)
    ]
    overloaded = []
    for gateway in limited_pair:
        answers = [r.json() for r in await send_all(gateway, calls)]
        busy = [a for a in answers if a["result"]["isError"]]
        assert busy, "no call was refused: the limit was never reached"
        assert all(outcome(a["result"]) == "overloaded" for a in busy)
        overloaded.append(busy[0])
    direct, sdk = overloaded
    assert direct == sdk


# -- the pool ----------------------------------------------------------------------------------


async def test_a_call_that_waits_past_the_pool_timeout_is_overloaded_and_the_pool_recovers(
    redis_url: str,
) -> None:
    board = Board.from_url(redis_url, pool_size=1, pool_wait_seconds=0.2)
    try:
        await board.start()
        # BLPOP holds the only connection for a second, as a slow call would.
        holder = asyncio.create_task(board.client.blpop(["bb-test-nothing"], timeout=1))
        await asyncio.sleep(0.05)
        with pytest.raises(Overloaded) as refused:
            await board.get_state(GetState.parse({"uris": ["bb://ws/t/k"]}))
        assert refused.value.code == "overloaded"
        assert refused.value.details["retry_after"] > 0
        await holder
        # The slot came back, and every call after gives it back: with a leak, the second call
        # would wait out the bound. One waiter at a time, so no call's wait depends on how
        # fast this machine serves the others.
        for _ in range(20):
            answer = await board.get_state(GetState.parse({"uris": ["bb://ws/t/k"]}))
            assert answer["items"][0]["uri"] == "bb://ws/t/k"
        # Two at once: the second waits for the first's slot, far within the bound.
        both = await asyncio.gather(
            *(board.get_state(GetState.parse({"uris": ["bb://ws/t/k"]})) for _ in range(2))
        )
        assert len(both) == 2
    finally:
        await board.close()


async def test_connections_that_fail_to_connect_give_their_slot_back(tmp_path: Path) -> None:
    board = Board.from_url(f"redis://127.0.0.1:{free_port()}/0", pool_size=1, pool_wait_seconds=0.5)
    try:
        for _ in range(3):
            # Unavailable every time: a leaked slot would make the next one `overloaded`.
            with pytest.raises(Unavailable) as failed:
                await board.get_state(GetState.parse({"uris": ["bb://ws/t/k"]}))
            assert not isinstance(failed.value, Overloaded)
    finally:
        await board.close()


class _StarvedLoop:
    """The running loop's clock and connects, as a loop that other work holds up sees them:
    each connect's reply comes ``late_by`` seconds after it was sent."""

    def __init__(self, loop: asyncio.AbstractEventLoop, late_by: float) -> None:
        self._read_clock = loop.time
        self._connect = loop.create_connection
        self._late_by = late_by
        self.ahead = 0.0

    def time(self) -> float:
        return self._read_clock() + self.ahead

    async def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        self.ahead += self._late_by
        return await self._connect(*args, **kwargs)


async def test_a_connection_opened_on_a_starved_loop_has_the_operations_whole_deadline(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A thousand calls in one process can hold the loop for seconds while a connect is in
    # flight. Redis answered at once; only the loop was late, so the call must not hear
    # `unavailable` while its operation's deadline has time left.
    loop = asyncio.get_running_loop()
    starved = _StarvedLoop(loop, late_by=3.0)
    monkeypatch.setattr(loop, "time", starved.time)
    monkeypatch.setattr(loop, "create_connection", starved.create_connection)
    board = Board(client=board_client(redis_url, timeout_seconds=30.0))
    try:
        answer = await board.get_state(GetState.parse({"uris": ["bb://ws/t/k"]}))
        assert answer["items"][0]["uri"] == "bb://ws/t/k"
        assert starved.ahead >= 3.0, "no connection was opened: the test proved nothing"
    finally:
        await board.close()
