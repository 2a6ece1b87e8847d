"""A listing's and a search's admission (revocation and rate limit) rides their first round
trip to Redis, as a write's and a get_state's does: no round trip of its own, judged before
anything read is used, and judged alone when the call sends nothing to Redis
(``BoardClient.admitted``). Through the gateway, tests/test_revocation_and_limits.py holds the
refusals themselves."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from store_support import WS, RoundTrips, uri

from blackboard_mcp.store import Board, Gate, ListKeys, SearchKeys, UpdateState


class Refused(Exception):
    """What the test's gate raises to refuse a call."""


class Gates:
    """Gates that count in Redis how often they ran, and remember each verdict."""

    def __init__(self) -> None:
        self.verdicts: list[int] = []

    def gate(self, *, refuse: bool = False) -> Gate:
        def judge(reply: Any) -> None:
            self.verdicts.append(int(reply))
            if refuse:
                raise Refused

        return Gate(command=("INCR", f"bbtest:{{{WS}}}:gate-ran"), judge=judge)


Call = Callable[[Board, Gate | None], Coroutine[Any, Any, dict[str, Any]]]
CALLS: dict[str, Call] = {
    "list_keys of a topic": lambda board, gate: board.list_keys(
        ListKeys.parse({"topic": "t"}), workspace=WS, gate=gate
    ),
    "list_keys of every topic": lambda board, gate: board.list_keys(
        ListKeys.parse({}), workspace=WS, gate=gate
    ),
    "list_keys of a kind, by name": lambda board, gate: board.list_keys(
        ListKeys.parse({"topic": "t", "kind": "text", "order": "name"}), workspace=WS, gate=gate
    ),
    "list_keys of changes": lambda board, gate: board.list_keys(
        ListKeys.parse({"cursor": 0}), workspace=WS, gate=gate
    ),
    "list_keys of a note's versions": lambda board, gate: board.list_keys(
        ListKeys.parse({"note": uri("a")}), workspace=WS, gate=gate
    ),
    "search_keys": lambda board, gate: board.search_keys(
        SearchKeys.parse({"q": "heron"}), workspace=WS, gate=gate
    ),
}


@pytest.fixture
async def counted(redis_url: str) -> Any:
    trips = RoundTrips()
    board = Board(client=trips.client(redis_url, also_redis_py=True))
    await board.start()
    for path in ("a", "b"):
        for _ in range(2):
            await board.update_state(
                UpdateState.parse({"uri": uri(path), "digest": f"heron {path}", "body": "x"}),
                author="a",
            )
    yield board, trips
    await board.close()


@pytest.mark.parametrize("name", list(CALLS))
async def test_a_read_admitted_on_its_way_makes_no_round_trip_more(
    counted: tuple[Board, RoundTrips], name: str
) -> None:
    board, trips = counted
    gates = Gates()
    call = CALLS[name]
    await call(board, None)  # once before counting: scripts loaded, connections open
    trips.count = 0
    alone = await call(board, None)
    without = trips.count
    trips.count = 0
    admitted = await call(board, gates.gate())
    assert trips.count == without, (name, trips.count, without)
    assert len(gates.verdicts) == 1
    assert admitted["items"] == alone["items"]


@pytest.mark.parametrize("name", list(CALLS))
async def test_a_refused_read_answers_its_refusal(
    counted: tuple[Board, RoundTrips], name: str
) -> None:
    board, _ = counted
    gates = Gates()
    with pytest.raises(Refused):
        await CALLS[name](board, gates.gate(refuse=True))
    assert len(gates.verdicts) == 1


async def test_a_listing_of_a_topic_it_may_not_read_is_admitted_once(
    counted: tuple[Board, RoundTrips],
) -> None:
    board, _ = counted
    gates = Gates()
    hidden = ListKeys.parse({"topic": "t"})
    answer = await board.list_keys(
        hidden, workspace=WS, readable=lambda _topic: False, gate=gates.gate()
    )
    assert answer["items"] == []
    assert len(gates.verdicts) == 1
    with pytest.raises(Refused):
        await board.list_keys(
            hidden, workspace=WS, readable=lambda _topic: False, gate=gates.gate(refuse=True)
        )
    assert gates.verdicts == [1, 2]  # each ran once, in Redis


class Broken(Exception):
    """What fails in the read before it asks Redis anything."""


async def test_a_read_that_asks_redis_nothing_is_still_admitted_and_a_refusal_comes_first(
    counted: tuple[Board, RoundTrips],
) -> None:
    board, trips = counted
    client = await board.redis.home(WS)
    gates = Gates()
    trips.count = 0
    async with client.operation(), client.admitted(gates.gate()):
        pass  # nothing sent: the gate goes alone at the end
    assert gates.verdicts == [1] and trips.count == 1
    # Something failed before the read reached Redis: a refused call answers the refusal.
    with pytest.raises(Refused):
        async with client.operation(), client.admitted(gates.gate(refuse=True)):
            raise Broken
    assert gates.verdicts == [1, 2]
    # Admitted, the failure itself is what the call answers.
    with pytest.raises(Broken):
        async with client.operation(), client.admitted(gates.gate()):
            raise Broken
    assert gates.verdicts == [1, 2, 3]
