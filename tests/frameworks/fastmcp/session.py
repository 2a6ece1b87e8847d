"""Two agents share a board through FastMCP's client, each calling its tools in a fixed order.

Run with this folder's own environment:

    python session.py SNIPPET WORKSPACE

SNIPPET is a file holding the README's FastMCP code with the gateway's URL in it; it is run as
it stands, once per agent with that agent's token in ``BB_TOKEN``, and its ``board`` and
``use_board`` are all the agents use. FastMCP's client has no model: what ``use_board`` returns
is what an agent would hand its model. The tokens come in the environment (``BB_TOKEN_A``,
``BB_TOKEN_B``), never on the command line, and are never printed. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
from collections.abc import Awaitable
from typing import Any

# A request body over the gateway's 2 MiB limit (BB_MAX_REQUEST_BYTES).
OVERSIZED_BODY = "x" * (2 * 1024 * 1024 + 1024)
# What each agent writes over version 1 of the plan; the test tells the winner by it.
REVISED = {
    "a": {"digest": "Plan, revised by A", "body": "Move the import to 02:00."},
    "b": {"digest": "Plan, revised by B", "body": "Move the import to 04:00."},
}


def snippet_for(snippet: str, token: str) -> dict[str, Any]:
    """The snippet's names, run as one agent would run it: with its own token in BB_TOKEN."""
    os.environ["BB_TOKEN"] = token
    return runpy.run_path(snippet)


async def what_the_person_sees(step: Awaitable[Any]) -> dict[str, Any] | None:
    """What ``step`` raises, as a person running it would read it; None if it succeeds."""
    try:
        await step
    except Exception as error:
        return _described(error)
    return None


def _described(error: BaseException) -> dict[str, Any]:
    seen: dict[str, Any] = {
        "type": f"{type(error).__module__}.{type(error).__qualname__}",
        "message": str(error),
    }
    if isinstance(error, BaseExceptionGroup):
        seen["inner"] = [_described(inner) for inner in error.exceptions]
    return seen


async def main(snippet: str, workspace: str) -> dict[str, Any]:
    agents = {
        name: snippet_for(snippet, os.environ[f"BB_TOKEN_{name.upper()}"]) for name in ("a", "b")
    }
    plan = f"bb://{workspace}/notes/plan"
    finding = f"bb://{workspace}/notes/finding"
    handed: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}

    async def use(name: str, tool: str, **arguments: Any) -> None:
        result = await agents[name]["use_board"](tool, **arguments)
        handed[name].append({"tool": tool, "result": result})

    a, b = agents["a"]["board"], agents["b"]["board"]
    async with a, b:
        listed = {
            name: sorted(t.name for t in await agent["board"].list_tools())
            for name, agent in agents.items()
        }
        await use(
            "b",
            "update_state",
            uri=finding,
            digest="Cache misses come from the nightly import",
            body="The nightly import evicts the hot keys.",
            expect_version=0,
        )
        await use(
            "a",
            "update_state",
            uri=plan,
            digest="Staged rollout plan",
            body="Move the import to 03:00, then roll out in stages.",
            expect_version=0,
        )
        await use("a", "link_state", src=plan, rel="derived_from", dst=[finding])
        await use("b", "get_state", uris=[plan], mode="full")
        await use("b", "search_keys", q="rollout", topic="notes")
        # Both read version 1 of the plan and write it back at once: one of them is stale.
        await asyncio.gather(
            use("a", "update_state", uri=plan, expect_version=1, **REVISED["a"]),
            use("b", "update_state", uri=plan, expect_version=1, **REVISED["b"]),
        )
        # The same stale write once more, through call_tool as FastMCP sets it by default and
        # with the snippet's setting, to show both shapes FastMCP gives a tool error.
        stale = {"uri": plan, "digest": "Plan, stale", "body": "stale", "expect_version": 1}
        by_default = await what_the_person_sees(a.call_tool("update_state", stale))
        result = await a.call_tool("update_state", stale, raise_on_error=False)
        not_raised = {
            "is_error": result.is_error,
            "data": result.data,
            "structured_content": result.structured_content,
            "content": [
                block.model_dump(mode="json", exclude_none=True) for block in result.content
            ],
        }
        too_large = await what_the_person_sees(
            agents["a"]["use_board"]("update_state", uri=plan, digest="big", body=OVERSIZED_BODY)
        )

    refused_board = snippet_for(snippet, "not-a-token")["board"]

    async def connect() -> None:
        async with refused_board:
            await refused_board.list_tools()

    return {
        "listed": listed,
        "handed": handed,
        "stale_write": {"call_tool": by_default, "raise_on_error=False": not_raised},
        "refused": {"token": await what_the_person_sees(connect()), "body": too_large},
    }


if __name__ == "__main__":
    snippet_path, workspace_name = sys.argv[1:]
    print(json.dumps(asyncio.run(main(snippet_path, workspace_name))))
