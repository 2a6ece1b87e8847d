"""list_keys can be walked to its end: ``next`` passed back as ``after`` continues the listing.

In every order, a note that is not written while the listing is walked is listed exactly
once, however many other notes are rewritten or created meanwhile (through the real gateway,
with writers running in threads beside the reader).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support import GatewayProcess, agent_token

from blackboard_mcp.auth import TokenIssuer

HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}
NOTES = 1000
CHURN = 200  # notes n0000..n0199 are rewritten while the listing is walked


class Caller:
    def __init__(self, url: str, token: str) -> None:
        self._url = url
        self._http = httpx.Client(
            timeout=60.0, headers={**HEADERS, "Authorization": f"Bearer {token}"}
        )

    def close(self) -> None:
        self._http.close()

    def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        response = self._http.post(self._url, content=json.dumps(request).encode())
        result = response.json()["result"]
        assert not result["isError"], result
        body: dict[str, Any] = result["structuredContent"]
        return body


@pytest.fixture(scope="module")
def board_of_a_thousand(gateway: GatewayProcess, issuer: TokenIssuer) -> Iterator[tuple[str, str]]:
    """One workspace of 1,000 notes in topic t, some rewritten so versions differ."""
    workspace = "ws-paging-1000"
    token = agent_token(issuer, workspace)
    call = Caller(gateway.mcp_url, token)
    try:
        for i in range(NOTES):
            call("update_state", uri=f"bb://{workspace}/t/n{i:04d}", digest=f"Note {i}.", body="")
        for i in range(0, NOTES, 7):  # versions 2 and 3 for some, with ties everywhere
            for _ in range(1 + i % 2):
                call(
                    "update_state", uri=f"bb://{workspace}/t/n{i:04d}", digest=f"Note {i}!", body=""
                )
    finally:
        call.close()
    yield workspace, token


def writers(
    url: str, token: str, workspace: str, stop: threading.Event, done: list[int]
) -> list[threading.Thread]:
    """Two writers: one rewrites the churn notes round and round, one creates new notes.
    ``done`` holds how many writes each has made so far (the rewriter's first)."""
    done.extend([0, 0])

    def rewrite() -> None:
        call = Caller(url, token)
        i = 0
        while not stop.is_set():
            call(
                "update_state",
                uri=f"bb://{workspace}/t/n{i % CHURN:04d}",
                digest=f"Churn {i}.",
                body="",
            )
            i += 1
            done[0] = i
        call.close()

    def create() -> None:
        call = Caller(url, token)
        i = 0
        while not stop.is_set():
            # New names sort among the old ones ("n0500-new-3" after "n0500").
            call(
                "update_state",
                uri=f"bb://{workspace}/t/n{(i * 37) % NOTES:04d}-new-{i}",
                digest="New.",
                body="",
            )
            i += 1
            done[1] = i
        call.close()

    return [threading.Thread(target=rewrite), threading.Thread(target=create)]


@pytest.mark.parametrize("order", ["recent", "name", "version"])
@pytest.mark.parametrize("mode", ["digest", "table"])
def test_every_untouched_note_is_listed_exactly_once_while_others_are_written(
    gateway: GatewayProcess, board_of_a_thousand: tuple[str, str], order: str, mode: str
) -> None:
    workspace, token = board_of_a_thousand
    call = Caller(gateway.mcp_url, token)
    stop = threading.Event()
    done: list[int] = []
    threads = writers(gateway.mcp_url, token, workspace, stop, done)
    for thread in threads:
        thread.start()
    seen: list[str] = []
    pages = 0
    try:
        # The walk starts once both writers are writing (polled; a busy machine is slow to
        # start threads), and each must write during it (checked below, not a count).
        started = time.monotonic()
        while min(done) < 3:
            assert time.monotonic() - started < 120, f"the writers did not start: {done}"
            time.sleep(0.01)
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
            page = call("list_keys", **args)
            assert page["spent_tokens"] <= 1500
            if mode == "table":
                seen += [line.split("\t")[0] for line in page["table"].split("\n")[1:]]
            else:
                seen += [item["uri"] for item in page["items"]]
            pages += 1
            assert pages < 200, "the listing does not end"
            if "next" not in page:
                break
            after = page["next"]
        during = [now - then for now, then in zip(done, before, strict=True)]
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        call.close()
    counts = Counter(seen)
    untouched = [f"bb://{workspace}/t/n{i:04d}" for i in range(CHURN, NOTES)]
    assert [(u, counts[u]) for u in untouched if counts[u] != 1] == []
    assert pages > 10
    # Both writers wrote while the listing was walked.
    assert min(during) > 0, during


def test_a_listing_in_each_order_ends_with_every_note_when_nothing_is_written(
    gateway: GatewayProcess, board_of_a_thousand: tuple[str, str]
) -> None:
    workspace, token = board_of_a_thousand
    call = Caller(gateway.mcp_url, token)
    try:
        everything = {
            u for u in _walk(call, order="name", limit=200) if u.startswith(f"bb://{workspace}")
        }
        for order in ("recent", "version"):
            listed = _walk(call, order=order, limit=61)
            assert len(listed) == len(set(listed)) == len(everything)
            assert set(listed) == everything
        by_version = _walk(call, order="version", limit=61, fields=["version"])
        assert by_version == sorted(by_version, key=lambda v: -int(v.split("\t")[1]))
    finally:
        call.close()


def _walk(call: Caller, **args: Any) -> list[str]:
    fields = args.pop("fields", None)
    out: list[str] = []
    after = None
    while True:
        extra = {"after": after} if after else {}
        if fields:
            page = call("list_keys", topic="t", mode="table", fields=fields, **args, **extra)
            out += page["table"].split("\n")[1:]
        else:
            page = call("list_keys", topic="t", **args, **extra)
            out += [i["uri"] for i in page["items"]]
        if "next" not in page:
            return out
        after = page["next"]


def test_an_after_from_another_order_is_refused(
    gateway: GatewayProcess, board_of_a_thousand: tuple[str, str]
) -> None:
    _, token = board_of_a_thousand
    call = Caller(gateway.mcp_url, token)
    try:
        page = call("list_keys", topic="t", order="name", limit=3)
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "list_keys",
                "arguments": {"topic": "t", "order": "recent", "after": page["next"]},
            },
        }
        response = call._http.post(call._url, content=json.dumps(request).encode())
        result = response.json()["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "invalid_argument"
        assert result["structuredContent"]["error"]["argument"] == "after"
    finally:
        call.close()
