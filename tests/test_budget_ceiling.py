"""budget_tokens is a ceiling on the whole answer, and spent_tokens is the answer's exact cost.

Through the gateway's app: every read's tool result text (which is the structured result,
serialized) costs exactly ``spent_tokens`` cl100k tokens, never more than the budget, over
random boards of text, tables, offloaded bodies, missing addresses and many links. What a
read leaves out is reported exactly: positions for get_state, ``next`` for list_keys,
addresses for search_keys; ``need_budget`` when nothing fits.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from app_support import MCP_PATH, InProcessGateway, direct_and_sdk_gateways_in_a_loop
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis, TiktokenCounter

COUNTER = TiktokenCounter()
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}
# Text with what costs extra inside JSON: quotes, backslashes, tabs, newlines, non-ASCII.
WORDS = [
    "cache",
    "replica",
    "lag",
    "the",
    'say "hi"',
    "back\\slash",
    "tab\there",
    "line\nbreak",
    "para\n\ngraph.",
    "naïve",
    "東京",
    "🙂",
    "bb://w/t/x",
    "1234567",
    "end.",
]
# Cells may not hold a raw tab or line break.
CELLS = [w for w in WORDS if "\t" not in w and "\n" not in w]

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)


@dataclass(frozen=True)
class Gateways:
    """The module's two apps on one loop: the default one and one answering through the SDK."""

    runner: asyncio.Runner
    direct: InProcessGateway
    sdk: InProcessGateway


class Wire:
    """Raw tools/call POSTs as an agent's client sends them; answers with the result's text."""

    def __init__(self, runner: asyncio.Runner, gateway: InProcessGateway, token: str) -> None:
        self._runner = runner
        self._gateway = gateway
        self._headers = {**HEADERS, "Authorization": f"Bearer {token}"}

    def call(self, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any], str]:
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        response = self._runner.run(
            self._gateway.http.post(
                MCP_PATH, content=json.dumps(request).encode(), headers=self._headers
            )
        )
        assert response.status_code == 200, response.text[:500]
        result = response.json()["result"]
        [content] = result["content"]
        body = result["structuredContent"]
        assert json.loads(content["text"]) == body
        return bool(result["isError"]), body, content["text"]

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        is_error, body, _ = self.call(tool, **arguments)
        assert not is_error, body
        return body


def honest(text: str, body: dict[str, Any], budget: int) -> None:
    """The ceiling and the exact count, against the text the client received."""
    real = COUNTER.count(text)
    assert body["spent_tokens"] == real, (body["spent_tokens"], real)
    assert real <= budget, (real, budget, text[:300])


@pytest.fixture(scope="module")
def gateways(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateways]:
    """Held open for the module on its own loop (the property's examples are synchronous);
    tests keep apart by their fresh workspaces."""
    workdir = tmp_path_factory.mktemp("budget")
    with direct_and_sdk_gateways_in_a_loop(redis_server.url, workdir) as (runner, direct, sdk):
        yield Gateways(runner, direct, sdk)


@pytest.fixture
def wire(gateways: Gateways, issuer: TokenIssuer, workspace: str) -> Wire:
    return Wire(gateways.runner, gateways.direct, agent_token(issuer, workspace))


def addr(ws: str, path: str, topic: str = "t") -> str:
    return f"bb://{ws}/{topic}/{path}"


def paragraph(i: int, words: int) -> str:
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(words))


# --- the measurements of the issue, now held to the ceiling ---------------------------------------


def sixty_notes(wire: Wire, ws: str) -> list[str]:
    uris = [addr(ws, f"n{i:02d}") for i in range(60)]
    for i, uri in enumerate(uris):
        wire.ok("update_state", uri=uri, digest=f"Note {i} on caches.", body=paragraph(i, 220))
    return uris


@pytest.mark.parametrize("budget", [100, 2000])
def test_a_full_read_of_sixty_notes_stays_within_the_budget(
    wire: Wire, workspace: str, budget: int
) -> None:
    uris = sixty_notes(wire, workspace)
    _, body, text = wire.call("get_state", uris=uris, mode="full", budget_tokens=budget)
    honest(text, body, budget)
    shown = len(body["items"])
    assert body["omitted"] == 60 - shown and body["truncated"] is True
    assert body["omitted_at"] == [[shown, 59]]
    assert [i["uri"] for i in body["items"]] == uris[:shown]


def test_a_hundred_missing_addresses_are_reported_by_position_within_budget(
    wire: Wire, workspace: str
) -> None:
    uris = [addr(workspace, f"gone-{i}") for i in range(100)]
    _, body, text = wire.call("get_state", uris=uris, budget_tokens=100)
    honest(text, body, 100)
    shown = len(body["items"])
    assert body["items"] == [{"uri": u, "error": "not_found"} for u in uris[:shown]]
    assert body["omitted_at"] == [[shown, 99]]


def test_fifty_nine_contradictions_collapse_into_one_warning_that_fits(
    wire: Wire, workspace: str
) -> None:
    claim = addr(workspace, "claim")
    wire.ok("update_state", uri=claim, digest="A claim.", body="")
    for i in range(59):
        doubt = addr(workspace, f"doubt-{i:02d}")
        wire.ok("update_state", uri=doubt, digest=f"Doubt {i}.", body="")
        wire.ok("link_state", src=doubt, rel="contradicts", dst=[claim])
    _, body, text = wire.call("get_state", uris=[claim], mode="ref", budget_tokens=100)
    honest(text, body, 100)
    # Item and warning together cost about 100 tokens: shown, or the exact budget that would.
    budget = 100 if body["items"] else body["need_budget"]
    assert budget <= 120
    _, body, text = wire.call("get_state", uris=[claim], mode="ref", budget_tokens=budget)
    honest(text, body, budget)
    assert [i["uri"] for i in body["items"]] == [claim]
    assert body["warnings"] == [
        f"{claim} is contradicted by {addr(workspace, 'doubt-00')} and 58 more"
    ]


@pytest.mark.parametrize("mode", ["digest", "table", "ref"])
def test_a_listing_at_the_smallest_budget_fits_and_continues(
    wire: Wire, workspace: str, mode: str
) -> None:
    uris = sixty_notes(wire, workspace)
    seen: list[str] = []
    after: str | None = None
    for _ in range(80):
        args: dict[str, Any] = {"topic": "t", "mode": mode, "limit": 200, "budget_tokens": 100}
        if after:
            args["after"] = after
        _, body, text = wire.call("list_keys", **args)
        honest(text, body, 100)
        if mode == "table":
            seen += [line.split("\t")[0] for line in body["table"].split("\n")[1:]]
        else:
            seen += [i["uri"] for i in body["items"]]
        if "next" not in body:
            break
        after = body["next"]
    assert seen == list(reversed(uris))


def test_when_nothing_fits_need_budget_says_what_would(wire: Wire, workspace: str) -> None:
    uri = addr(workspace, "long-address-" + "x" * 100)
    wire.ok("update_state", uri=uri, digest="A digest of some length. " * 12, body="")
    _, body, text = wire.call("get_state", uris=[uri], budget_tokens=100)
    honest(text, body, 100)
    assert body["items"] == [] and body["omitted_at"] == [[0, 0]]
    need = body["need_budget"]
    assert need > 100
    _, again, text = wire.call("get_state", uris=[uri], budget_tokens=need)
    honest(text, again, need)
    assert [i["uri"] for i in again["items"]] == [uri]


def test_the_sdk_path_sends_the_same_text_at_the_same_cost(
    wire: Wire, gateways: Gateways, issuer: TokenIssuer, workspace: str
) -> None:
    uris = sixty_notes(wire, workspace)
    _, direct, direct_text = wire.call("get_state", uris=uris[:10], mode="full", budget_tokens=700)
    sdk = Wire(gateways.runner, gateways.sdk, agent_token(issuer, workspace))
    _, body, text = sdk.call("get_state", uris=uris[:10], mode="full", budget_tokens=700)
    assert text == direct_text and body == direct
    honest(text, body, 700)


# --- random boards --------------------------------------------------------------------------------


@st.composite
def boards(draw: st.DrawFn) -> dict[str, Any]:
    notes: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 20))):
        form = draw(st.sampled_from(["text", "text", "table", "big", "empty"]))
        if form == "text":
            notes.append(("text", draw(st.integers(1, 700))))
        elif form == "table":
            notes.append(("table", (draw(st.integers(1, 6)), draw(st.integers(0, 60)))))
        elif form == "big":
            notes.append(("big", draw(st.integers(11_000, 60_000))))
        else:
            notes.append(("empty", 0))
    count = len(notes)
    links = draw(
        st.lists(
            st.tuples(
                st.integers(0, count - 1),
                st.sampled_from(["contradicts", "supersedes", "cites"]),
                st.integers(0, count - 1),
            ),
            max_size=12,
        )
    )
    hub = draw(st.sampled_from([0, 0, 0, 30]))
    return {"notes": notes, "links": links, "hub": hub}


@st.composite
def reads(draw: st.DrawFn, count: int) -> list[tuple[str, dict[str, Any]]]:
    budget = st.one_of(st.integers(100, 600), st.integers(600, 6000), st.just(100))
    out: list[tuple[str, dict[str, Any]]] = []
    for _ in range(3):
        positions = draw(st.lists(st.integers(0, count + 2), min_size=1, max_size=20))
        mode = draw(st.sampled_from(["digest", "fields", "table", "full", "ref"]))
        args: dict[str, Any] = {"positions": positions, "mode": mode, "budget_tokens": draw(budget)}
        if mode in ("fields", "table") and draw(st.booleans()):
            args["fields"] = draw(
                st.lists(
                    st.sampled_from(
                        ["digest", "version", "links", "body", "table", "c0", "c2", "sources"]
                    ),
                    min_size=1,
                    max_size=4,
                )
            )
        elif mode == "fields":
            args["fields"] = ["digest", "version"]
        out.append(("get_state", args))
    for mode in ("digest", "table", "ref"):
        list_args: dict[str, Any] = {
            "topic": "t",
            "mode": mode,
            "order": draw(st.sampled_from(["recent", "name", "version"])),
            "limit": draw(st.integers(1, 40)),
            # Listings are cheap per row: small budgets are where they are cut.
            "budget_tokens": draw(st.one_of(st.integers(100, 400), budget)),
        }
        if draw(st.booleans()):
            list_args["fields"] = draw(
                st.lists(st.sampled_from(["digest", "version", "kind", "size"]), min_size=1)
            )
        out.append(("list_keys", list_args))
    out.append(("search_keys", {"q": draw(st.sampled_from(["cache", "replica lag", "東京"]))}))
    return out


def build(wire: Wire, ws: str, board: dict[str, Any]) -> list[str]:
    uris = [addr(ws, f"n{i}") for i in range(len(board["notes"]))]
    for i, (form, size) in enumerate(board["notes"]):
        uri, digest = uris[i], f"Note {i}: {paragraph(i, 6)}"
        if form == "text":
            wire.ok("update_state", uri=uri, digest=digest, body=paragraph(i, size))
        elif form == "big":
            body = (paragraph(i, 400) + "\n\n") * (size // 2000 + 1)
            wire.ok("update_state", uri=uri, digest=digest, body=body[:size])
        elif form == "table":
            columns, rows = size
            wire.ok(
                "update_state",
                uri=uri,
                digest=digest,
                columns=[f"c{c}" for c in range(columns)],
                rows=[[CELLS[(r + c) % len(CELLS)] for c in range(columns)] for r in range(rows)],
            )
        else:
            wire.ok("update_state", uri=uri, digest=digest, body="")
    for src, rel, dst in board["links"]:
        if src != dst:
            wire.ok("link_state", src=uris[src], rel=rel, dst=[uris[dst]])
    for h in range(board["hub"]):
        other = addr(ws, f"hub-{h}", topic="u")
        wire.ok("update_state", uri=other, digest=f"Hub {h}.", body="")
        wire.ok("link_state", src=other, rel="contradicts", dst=[uris[0]])
    return uris


def check_read(wire: Wire, ws: str, uris: list[str], tool: str, args: dict[str, Any]) -> None:
    call = dict(args)
    if tool == "get_state":
        asked = [
            uris[p] if p < len(uris) else addr(ws, f"missing-{p}") for p in call.pop("positions")
        ]
        call["uris"] = asked
    is_error, body, text = wire.call(tool, **call)
    assert not is_error, body
    honest(text, body, call.get("budget_tokens", 2000))
    if tool == "get_state":
        distinct = list(dict.fromkeys(asked))
        shown = [i["uri"] for i in body["items"]]
        # The items are the first distinct addresses, in order; the rest are at omitted_at.
        assert shown == distinct[: len(shown)], body
        omitted = [asked[p] for a, b in body["omitted_at"] for p in range(a, b + 1)]
        assert list(dict.fromkeys(omitted)) == distinct[len(shown) :], body
        assert body["omitted"] == len(distinct) - len(shown)
        for item in body["items"]:
            if "cut" in item:
                assert item["cut"]["shown_tokens"] < item["cut"]["total_tokens"], item
                if "rows" in item:
                    assert item["rows"] and all(isinstance(r, list) for r in item["rows"]), item
                else:
                    assert isinstance(item["body"], str)
        if not shown:
            assert "need_budget" in body, body


@settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(data=st.data(), board=boards())
def test_every_read_of_a_random_board_costs_exactly_spent_and_at_most_the_budget(
    gateways: Gateways, issuer: TokenIssuer, data: st.DataObject, board: dict[str, Any]
) -> None:
    ws = "ws-" + uuid.uuid4().hex[:12]
    wire = Wire(gateways.runner, gateways.direct, agent_token(issuer, ws))
    uris = build(wire, ws, board)
    for tool, args in data.draw(reads(len(uris))):
        check_read(wire, ws, uris, tool, args)


def test_a_search_hit_list_is_held_to_the_default_budget(wire: Wire, workspace: str) -> None:
    for i in range(50):
        wire.ok(
            "update_state",
            uri=addr(workspace, f"s{i:02d}"),
            digest=f"Cache finding {i}: " + paragraph(i, 120)[:900],
            body="",
        )
    _, body, text = wire.call("search_keys", q="cache finding", limit=50)
    honest(text, body, 2000)
    assert body["truncated"] is True
    assert len(body["items"]) + len(body["omitted_uris"]) == 50
    assert body["omitted"] == len(body["omitted_uris"])
