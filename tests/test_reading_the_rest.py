"""A note cut to the budget names the address of its rest; reading the rests, in turn, gives
back exactly the whole content, each answer within its budget.

Through the real path (MCP client -> the gateway app -> Redis): notes kept in their hash and notes
offloaded to a blob, text and tables, a chosen column set, multi-byte text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from app_support import InProcessGateway
from mcp import Client
from support import agent_token, call

from blackboard_mcp.auth import TokenIssuer

PARAGRAPH = "Replica lag grew past the alert line; the WAL sender fell behind. Ärger über Ω. "


def long_text(paragraphs: int) -> str:
    return "\n\n".join(f"{n}. " + PARAGRAPH * (1 + n % 4) for n in range(paragraphs))


async def read_all(
    client: Client, uri: str, budget: int, **arguments: Any
) -> tuple[str, str, list[dict[str, Any]]]:
    """Follow ``cut.rest`` from ``uri`` to the end: the pieces joined, and every answer."""
    pieces: list[str] = []
    answers: list[dict[str, Any]] = []
    field = ""
    address = uri
    for _ in range(500):
        err, body = await call(
            client, "get_state", uris=[address], budget_tokens=budget, **arguments
        )
        assert not err, body
        answers.append(body)
        assert body["spent_tokens"] <= budget
        [item] = body["items"]
        field = "rows" if "rows" in item else "body"
        # A table's rows, as the TSV lines they are stored as, one per row.
        pieces.append(
            "".join("\t".join(row) + "\n" for row in item["rows"])
            if field == "rows"
            else item[field]
        )
        cut = item.get("cut")
        if cut is None:
            return "".join(pieces), field, answers
        assert cut["rest"].startswith(uri.split("@")[0] + "@")
        address = cut["rest"]
    raise AssertionError("the rests never ended")


@pytest.mark.parametrize("paragraphs", [40, 600], ids=["in-the-note", "offloaded"])
async def test_following_the_rest_gives_back_the_whole_body(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, paragraphs: int
) -> None:
    uri = f"bb://{workspace}/logs/incident"
    body = long_text(paragraphs)
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        err, wrote = await call(client, "update_state", uri=uri, digest="the incident", body=body)
        assert not err, wrote
        whole, field, answers = await read_all(client, uri, 600, mode="full")
        assert field == "body" and whole == body
        assert len(answers) > 2
        first = answers[0]["items"][0]
        assert first["cut"]["total_tokens"] >= first["cut"]["shown_tokens"] > 0
        # The rest names the version read: a write in between does not shift it.
        rest = first["cut"]["rest"]
        assert rest.startswith(f"{uri}@1#")
        err, _ = await call(client, "update_state", uri=uri, digest="rewritten", body="short")
        assert not err
        err, again = await call(
            client, "get_state", uris=[rest], mode="full", budget_tokens=100_000
        )
        assert not err and again["items"][0]["body"] == body[len(first["body"]) :]
        # A part is its address and content: the note's fields came with the first part.
        assert set(again["items"][0]) == {"uri", "body"}, again
        # A rest read in digest mode (the default) still shows the content it names.
        err, plain = await call(client, "get_state", uris=[rest], budget_tokens=100_000)
        assert not err and plain["items"][0]["body"] == body[len(first["body"]) :]


async def test_a_cut_table_continues_at_a_row_with_the_same_columns(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    uri = f"bb://{workspace}/data/hosts"
    rows = [[f"host-{n:04d}", n % 7, f"zone {n % 3} Ω"] for n in range(2000)]
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        err, wrote = await call(
            client,
            "update_state",
            uri=uri,
            digest="hosts",
            columns=["host", "load", "zone"],
            rows=rows,
        )
        assert not err, wrote
        whole, field, answers = await read_all(
            client, uri, 800, mode="fields", fields=["host", "zone"]
        )
        assert field == "rows" and len(answers) > 2
        # The first part says which columns its rows hold; every part holds whole rows.
        assert answers[0]["items"][0]["columns"] == ["host", "zone"]
        assert whole.splitlines() == [f"{h}\t{z}" for h, _, z in rows]


async def test_a_rest_address_is_for_reading_and_a_hostile_one_answers_cleanly(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    uri = f"bb://{workspace}/logs/short"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        err, _ = await call(client, "update_state", uri=uri, digest="d", body="Ωmega" * 10)
        assert not err
        # Past the end: nothing left. Inside a character: from that character's first byte.
        err, body = await call(client, "get_state", uris=[f"{uri}@1#999999"], mode="full")
        assert not err and body["items"][0]["body"] == ""
        err, body = await call(client, "get_state", uris=[f"{uri}#1"], mode="full")
        assert not err and body["items"][0]["body"] == "Ωmega" * 10
        for tool, arguments in (
            ("update_state", {"uri": f"{uri}#3", "digest": "d", "body": "b"}),
            ("link_state", {"src": f"{uri}#3", "rel": "cites", "dst": [uri]}),
            ("list_keys", {"topic": f"{uri}#3"}),
        ):
            err, refused = await call(client, tool, **arguments)
            assert err and refused["error"]["code"] == "invalid_argument", (tool, refused)
            assert f"takes the note's address, {uri}" in refused["error"]["message"]
        for bad in (f"{uri}#0", f"{uri}#-1", f"{uri}#x", f"{uri}#1#2", f"{uri}#1@1"):
            err, refused = await call(client, "get_state", uris=[bad])
            assert err and refused["error"]["code"] == "invalid_argument", bad
            assert "#<byte offset>" in json.dumps(refused), refused


@pytest.mark.parametrize("budget", [1000, 2000, 3000])
@pytest.mark.parametrize(
    "line",
    [
        "07:{n:02d} replica db-2 lag {n} s; WAL queue {n}0 MB.\n\n",
        'say "{n}"\t"quoted" \\ back\\slash {n}\n',
    ],
    ids=["blank-lines", "quotes-tabs-backslashes"],
)
async def test_a_cut_fills_its_budget_whatever_the_text_escapes_to(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, budget: int, line: str
) -> None:
    # Newlines, quotes, tabs and backslashes cost more tokens escaped in JSON than raw: a cut
    # measured on the raw text must still come out near the budget, not empty.
    uri = f"bb://{workspace}/logs/escapes"
    body = "".join(line.format(n=n % 60) for n in range(900))
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        err, _ = await call(client, "update_state", uri=uri, digest="escapes", body=body)
        assert not err
        err, read = await call(client, "get_state", uris=[uri], mode="full", budget_tokens=budget)
        assert not err, read
        [item] = read["items"]
        assert "cut" in item and body.startswith(item["body"]), read
        assert 0.8 * budget <= read["spent_tokens"] <= budget, read["spent_tokens"]
