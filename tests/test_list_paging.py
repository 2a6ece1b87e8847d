"""list_keys can be walked to its end: ``next`` passed back as ``after`` continues the listing.

In every order, a note that is not written while the listing is walked is listed exactly
once, however many other notes are rewritten or created meanwhile (through the gateway's app,
with writers running as tasks beside the reader).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from app_support import InProcessGateway, gateway_in_a_loop
from support import agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis

NOTES = 1000
CHURN = 200  # notes n0000..n0199 are rewritten while the listing is walked


@dataclass(frozen=True)
class Caller:
    gateway: InProcessGateway
    token: str

    async def answer(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The tool's whole result, an error or not."""
        params = {"name": tool, "arguments": arguments}
        result: dict[str, Any] = (await self.gateway.rpc(self.token, "tools/call", params))[
            "result"
        ]
        return result

    async def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.answer(tool, **arguments)
        assert not result["isError"], result
        body: dict[str, Any] = result["structuredContent"]
        return body


@dataclass(frozen=True)
class Thousand:
    """The gateway held open on its own loop for the module, the notes written once."""

    runner: asyncio.Runner
    workspace: str
    call: Caller

    def run(self, work: Coroutine[Any, Any, None]) -> None:
        self.runner.run(work)


@pytest.fixture(scope="module")
def board_of_a_thousand(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory, issuer: TokenIssuer
) -> Iterator[Thousand]:
    """One workspace of 1,000 notes in topic t, some rewritten so versions differ."""
    workspace = "ws-paging-1000"
    workdir = tmp_path_factory.mktemp("paging")
    with gateway_in_a_loop(redis_server.url, workdir) as (runner, gateway):
        call = Caller(gateway, agent_token(issuer, workspace))

        async def fill() -> None:
            for i in range(NOTES):
                uri = f"bb://{workspace}/t/n{i:04d}"
                await call("update_state", uri=uri, digest=f"Note {i}.", body="")
            for i in range(0, NOTES, 7):  # versions 2 and 3 for some, with ties everywhere
                for _ in range(1 + i % 2):
                    uri = f"bb://{workspace}/t/n{i:04d}"
                    await call("update_state", uri=uri, digest=f"Note {i}!", body="")

        runner.run(fill())
        yield Thousand(runner, workspace, call)


def writers(
    call: Caller, workspace: str, stop: asyncio.Event, done: list[int]
) -> list[asyncio.Task[None]]:
    """Two writers: one rewrites the churn notes round and round, one creates new notes.
    ``done`` holds how many writes each has made so far (the rewriter's first)."""
    done.extend([0, 0])

    async def rewrite() -> None:
        i = 0
        while not stop.is_set():
            await call(
                "update_state",
                uri=f"bb://{workspace}/t/n{i % CHURN:04d}",
                digest=f"Churn {i}.",
                body="",
            )
            i += 1
            done[0] = i

    async def create() -> None:
        i = 0
        while not stop.is_set():
            # New names sort among the old ones ("n0500-new-3" after "n0500").
            await call(
                "update_state",
                uri=f"bb://{workspace}/t/n{(i * 37) % NOTES:04d}-new-{i}",
                digest="New.",
                body="",
            )
            i += 1
            done[1] = i

    return [asyncio.create_task(rewrite()), asyncio.create_task(create())]


@pytest.mark.parametrize("order", ["recent", "name", "version"])
@pytest.mark.parametrize("mode", ["digest", "table"])
def test_every_untouched_note_is_listed_exactly_once_while_others_are_written(
    board_of_a_thousand: Thousand, order: str, mode: str
) -> None:
    workspace, call = board_of_a_thousand.workspace, board_of_a_thousand.call
    seen: list[str] = []
    pages = 0
    during: list[int] = []

    async def walk() -> None:
        nonlocal pages, during
        stop = asyncio.Event()
        done: list[int] = []
        tasks = writers(call, workspace, stop, done)
        try:
            # The walk starts once both writers are writing (polled), and each must write
            # during it (checked below, not a count).
            started = time.monotonic()
            while min(done) < 3:
                assert time.monotonic() - started < 120, f"the writers did not start: {done}"
                await asyncio.sleep(0.01)
            before = list(done)
            after: str | None = None
            while True:
                args: dict[str, Any] = {
                    "topic": "t",
                    "order": order,
                    "mode": mode,
                    "limit": 97,
                    # Small enough that the budget, not the limit, often ends a page.
                    "budget_tokens": 1500,
                }
                if after is not None:
                    args["after"] = after
                page = await call("list_keys", **args)
                assert page["spent_tokens"] <= 1500
                if mode == "table":
                    seen.extend(line.split("\t")[0] for line in page["table"].split("\n")[1:])
                else:
                    seen.extend(item["uri"] for item in page["items"])
                pages += 1
                assert pages < 200, "the listing does not end"
                if "next" not in page:
                    break
                after = page["next"]
            during = [now - then for now, then in zip(done, before, strict=True)]
        finally:
            stop.set()
            await asyncio.gather(*tasks)

    board_of_a_thousand.run(walk())
    counts = Counter(seen)
    untouched = [f"bb://{workspace}/t/n{i:04d}" for i in range(CHURN, NOTES)]
    assert [(u, counts[u]) for u in untouched if counts[u] != 1] == []
    assert pages > 10
    # Both writers wrote while the listing was walked.
    assert min(during) > 0, during


def test_a_listing_in_each_order_ends_with_every_note_when_nothing_is_written(
    board_of_a_thousand: Thousand,
) -> None:
    workspace, call = board_of_a_thousand.workspace, board_of_a_thousand.call

    async def check() -> None:
        everything = {
            u
            for u in await _walk(call, order="name", limit=200)
            if u.startswith(f"bb://{workspace}")
        }
        for order in ("recent", "version"):
            listed = await _walk(call, order=order, limit=61)
            assert len(listed) == len(set(listed)) == len(everything)
            assert set(listed) == everything
        by_version = await _walk(call, order="version", limit=61, fields=["version"])
        assert by_version == sorted(by_version, key=lambda v: -int(v.split("\t")[1]))

    board_of_a_thousand.run(check())


async def _walk(call: Caller, **args: Any) -> list[str]:
    fields = args.pop("fields", None)
    out: list[str] = []
    after = None
    while True:
        extra = {"after": after} if after else {}
        if fields:
            page = await call("list_keys", topic="t", mode="table", fields=fields, **args, **extra)
            out += page["table"].split("\n")[1:]
        else:
            page = await call("list_keys", topic="t", **args, **extra)
            out += [i["uri"] for i in page["items"]]
        if "next" not in page:
            return out
        after = page["next"]


def test_an_after_from_another_order_is_refused(board_of_a_thousand: Thousand) -> None:
    call = board_of_a_thousand.call

    async def check() -> None:
        page = await call("list_keys", topic="t", order="name", limit=3)
        result = await call.answer("list_keys", topic="t", order="recent", after=page["next"])
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "invalid_argument"
        assert result["structuredContent"]["error"]["argument"] == "after"

    board_of_a_thousand.run(check())
