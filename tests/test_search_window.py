"""search_keys looks among the workspace's latest writes first, then among ten times as many
and so on, and at the whole workspace when those hold too few matches (BB_SEARCH_WINDOW;
store/search/_search.py).

Through the real path, MCP client -> the gateway app -> Redis, with a window of 4 writes so
that a handful of notes shows what a board of millions does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from app_support import InProcessGateway, in_process_gateway
from mcp.client import Client
from support import agent_token, call

from blackboard_mcp.auth import TokenIssuer

WINDOW = 4


@pytest.fixture
async def windowed(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    async with in_process_gateway(redis_url, tmp_path / "gw", search_window=WINDOW) as running:
        yield running


async def _write(client: Client, uri: str, digest: str, body: str) -> None:
    err, wrote = await call(client, "update_state", uri=uri, digest=digest, body=body)
    assert not err, wrote


async def _found(client: Client, q: str, **arguments: object) -> list[str]:
    err, answer = await call(client, "search_keys", q=q, **arguments)
    assert not err, answer
    return [item["uri"] for item in answer["items"]]


async def test_a_common_word_ranks_among_the_latest_writes_and_a_rare_one_is_found_anywhere(
    windowed: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    at = f"bb://{workspace}/t/"
    async with windowed.mcp_client(agent_token(issuer, workspace)) as client:
        # The oldest note is the best match for "walrus" (in its digest), and the only one
        # holding "ptarmigan".
        await _write(client, at + "old", "walrus walrus", "walrus ptarmigan")
        for i in range(8):
            await _write(client, at + f"n{i}", f"note {i}", "a walrus in the body")

        # Eight later writes hold "walrus": the window's four latest are enough for a limit
        # of 3, and the best of the whole board, written nine writes ago, is not seen.
        latest = await _found(client, "walrus", limit=3)
        assert len(latest) == 3
        assert set(latest) <= {at + f"n{i}" for i in range(4, 8)}

        # More than the window holds: the whole workspace's matches, the best first.
        everything = await _found(client, "walrus", limit=10)
        assert everything[0] == at + "old"
        assert set(everything) == {at + "old", *(at + f"n{i}" for i in range(8))}

        # A word none of the latest writes holds is found wherever it is.
        assert await _found(client, "ptarmigan") == [at + "old"]

        # A note written again is among the latest writes again.
        await _write(client, at + "old", "walrus walrus", "walrus ptarmigan again")
        assert (await _found(client, "walrus", limit=3))[0] == at + "old"


async def test_a_word_the_latest_writes_lack_is_ranked_among_ten_times_as_many_before_all(
    windowed: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    at = f"bb://{workspace}/t/"
    async with windowed.mcp_client(agent_token(issuer, workspace)) as client:
        # Writes 1 to 46: the best match for "heron" (and the only "bittern") first, fifteen
        # fillers, ten more herons (writes 17 to 26), then twenty fillers.
        await _write(client, at + "old", "heron heron", "heron bittern")
        for i in range(15):
            await _write(client, at + f"a{i}", f"filler {i}", "nothing here")
        herons = [at + f"h{i}" for i in range(10)]
        for uri in herons:
            await _write(client, uri, "a note", "a heron in the body")
        for i in range(20):
            await _write(client, at + f"b{i}", f"filler {i}", "nothing here")

        # The latest 4 writes hold no heron; the latest 40 hold ten, enough for a limit of
        # 3: the best of the whole workspace, 46 writes ago, is not looked at.
        found = await _found(client, "heron", limit=3)
        assert len(found) == 3
        assert set(found) <= set(herons)

        # More than the latest 40 hold: the whole workspace's, the best first.
        everything = await _found(client, "heron", limit=20)
        assert everything[0] == at + "old"
        assert set(everything) == {at + "old", *herons}

        # A word only the oldest note holds is found, after the wider looks found none.
        assert await _found(client, "bittern") == [at + "old"]


async def test_notes_holding_every_word_come_first_even_when_only_older_notes_do(
    windowed: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    at = f"bb://{workspace}/t/"
    async with windowed.mcp_client(agent_token(issuer, workspace)) as client:
        await _write(client, at + "both", "kafka lag", "consumer kafka lag")
        for i in range(6):
            await _write(client, at + f"k{i}", f"kafka {i}", "kafka only")
        found = await _found(client, "kafka lag", limit=3)
        # The window holds three notes with "kafka" but none with both words: the group of
        # notes holding every word is looked for in the whole workspace, and leads.
        assert found[0] == at + "both"
        assert len(found) == 3


async def test_a_window_of_zero_ranks_the_whole_workspace_every_time(
    redis_url: str, tmp_path: Path, issuer: TokenIssuer, workspace: str
) -> None:
    at = f"bb://{workspace}/t/"
    async with (
        in_process_gateway(redis_url, tmp_path / "gw0", search_window=0) as gateway,
        gateway.mcp_client(agent_token(issuer, workspace)) as client,
    ):
        await _write(client, at + "old", "walrus walrus", "walrus")
        for i in range(8):
            await _write(client, at + f"n{i}", f"note {i}", "a walrus in the body")
        assert (await _found(client, "walrus", limit=3))[0] == at + "old"
