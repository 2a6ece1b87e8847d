"""Two agents share a board through the OpenAI Agents SDK's ``MCPServerStreamableHttp``, each
driven by the SDK's own ``ScriptedModel``.

Run by ``tests/test_framework_openai_agents.py`` with this folder's own environment::

    python session.py SNIPPET WORKSPACE

with ``BB_TOKEN_A`` and ``BB_TOKEN_B`` in the environment. SNIPPET is a file holding the
README's OpenAI Agents SDK entry with the test gateway's endpoint in it: each agent is that
code, run with the agent's own token as ``BB_TOKEN``, and every run gets a ``ScriptedModel`` in
place of the snippet's model, which is never called. Prints one JSON line: what each run's
model was handed, and what a person sees when the gateway refuses the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import runpy
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from agents import Agent, FunctionTool, RunConfig, Runner
from agents.mcp import MCPServerStreamableHttp
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

ToolCall = tuple[str, dict[str, Any]]
# A step is a tool call, or a function of what the model was handed so far that makes one.
Step = ToolCall | Callable[[list[dict[str, Any]]], ToolCall]

# Over the gateway's 2 MiB request limit.
TOO_LARGE_BODY = "x" * (3 << 20)


def handed(call: ModelCall) -> list[dict[str, Any]]:
    """The tool results in a model call's input, each as the model receives it, with the name
    of the tool whose call it answers (the call id is dropped: it is random)."""
    items = call.input if isinstance(call.input, list) else []
    names = {i["call_id"]: i["name"] for i in map(dict, items) if i.get("type") == "function_call"}
    results = []
    for item in map(dict, items):
        if item.get("type") == "function_call_output":
            results.append({"tool": names[item.pop("call_id")], **item})
    return results


def script(*steps: Step) -> ScriptedModel:
    """A model that makes the given tool calls in order, then answers in text."""

    def step(number: int, made: Step) -> ModelStep:
        def respond(call: ModelCall) -> list[Any]:
            name, args = made(handed(call)) if callable(made) else made
            return [function_call(name, args, call_id=f"call-{number}")]

        return ModelStep.respond(respond)

    return ScriptedModel([*(step(n, s) for n, s in enumerate(steps)), [assistant_message("done")]])


def snippet_with_token(snippet: str, token: str) -> dict[str, Any]:
    """What the README's code defines (``board``, ``agent``), run with ``token`` as BB_TOKEN."""
    os.environ["BB_TOKEN"] = token
    try:
        return runpy.run_path(snippet, run_name="board_snippet")
    finally:
        del os.environ["BB_TOKEN"]


async def run(board: Any, agent: Agent[Any], model: ScriptedModel) -> dict[str, Any]:
    """One run of ``agent`` with ``model``: the tools the model was offered, and every tool
    result it was handed."""
    async with board:
        result = await Runner.run(
            agent, "Work on the board.", run_config=RunConfig(model=model, tracing_disabled=True)
        )
    model.assert_complete()
    first, last = model.first_call, model.last_call
    assert first is not None and last is not None
    tools = [
        {"name": t.name, "strict": t.strict_json_schema, "parameters": t.params_json_schema}
        for t in first.tools
        if isinstance(t, FunctionTool)
    ]
    return {"tools": tools, "received": handed(last), "output": result.final_output}


async def run_snippet(defined: dict[str, Any], model: ScriptedModel) -> dict[str, Any]:
    """One run of the snippet's own agent; the tools it offers are reported once, apart."""
    ran = await run(defined["board"], defined["agent"], model)
    del ran["tools"]
    return ran


def current_version_from(received: list[dict[str, Any]]) -> int:
    """What a model reads off the conflict it was just handed: the note's current version."""
    [text] = received[-1]["output"]
    error = json.loads(text["text"])["error"]
    assert error["code"] == "conflict", error
    return int(error["current_version"])


async def session(snippet: str, workspace: str) -> dict[str, Any]:
    a = snippet_with_token(snippet, os.environ["BB_TOKEN_A"])
    b = snippet_with_token(snippet, os.environ["BB_TOKEN_B"])
    findings = f"bb://{workspace}/notes/findings"
    plan = f"bb://{workspace}/notes/plan"
    shared = f"bb://{workspace}/notes/shared"

    def write(uri: str, digest: str, version: int, body: str = "") -> ToolCall:
        args = {"uri": uri, "digest": digest, "body": body or digest, "expect_version": version}
        return ("update_state", args)

    report: dict[str, Any] = {"mcp_config": a["agent"].mcp_config}
    report["b_writes"] = await run_snippet(
        b, script(write(findings, "Cache misses double under the migration load", 0))
    )
    report["a_writes_and_links"] = await run_snippet(
        a,
        script(
            write(plan, "Plan: move the migration to off-peak hours", 0),
            ("link_state", {"src": plan, "rel": "derived_from", "dst": [findings]}),
        ),
    )
    report["b_reads_and_searches"] = await run_snippet(
        b,
        script(
            ("get_state", {"uris": [plan], "mode": "full"}),
            ("search_keys", {"q": "migration", "topic": "notes"}),
        ),
    )
    # Both agents write the shared note expecting version 0: A first, so B's write conflicts;
    # B then writes again at the version the conflict told it.
    report["a_shared"] = await run_snippet(a, script(write(shared, "A: ship on Tuesday", 0)))
    report["b_shared"] = await run_snippet(
        b,
        script(
            write(shared, "B: ship on Thursday", 0),
            lambda received: write(
                shared,
                "B: ship on Thursday, after A's Tuesday dry run",
                current_version_from(received),
            ),
        ),
    )

    # A body over the gateway's limit is an MCP error the SDK raises: the snippet's
    # failure_error_function, then the same board without it, as the SDK has it by default.
    huge = script(write(f"bb://{workspace}/notes/huge", "Too big", 0, TOO_LARGE_BODY))
    with logged() as said:
        report["too_large"] = {**await run_snippet(a, huge), "logged": said}
    plain = MCPServerStreamableHttp(params=a["board"].params, name=a["board"].name)
    huge = script(write(f"bb://{workspace}/notes/huge", "Too big", 0, TOO_LARGE_BODY))
    with logged() as said:
        ran = await run(plain, a["agent"].clone(mcp_servers=[plain]), huge)
        report["too_large_by_default"] = {"received": ran["received"], "logged": said}

    # What the model is offered: the snippet's agent, then the same agent with the SDK's
    # strict conversion switched on.
    report["tools"] = (await run(a["board"], a["agent"], script()))["tools"]
    strict = a["agent"].clone(
        mcp_config={**a["agent"].mcp_config, "convert_schemas_to_strict": True}
    )
    report["tools_when_strict"] = (await run(a["board"], strict, script()))["tools"]
    report["default_mcp_config"] = Agent(name="plain").mcp_config

    refused = snippet_with_token(snippet, "not-a-token")
    try:
        await run_snippet(refused, script(("list_keys", {})))
        report["wrong_token"] = {"raised": None}
    except Exception as error:
        kind = type(error)
        report["wrong_token"] = {
            "raised": f"{kind.__module__}.{kind.__qualname__}",
            "message": str(error),
            "leaves": [f"{type(e).__module__}.{type(e).__qualname__}: {e}" for e in leaves(error)],
            # What an uncaught error prints: a person reads this.
            "printed": "".join(traceback.format_exception(error)),
        }
    return report


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def logged() -> Iterator[list[str]]:
    """The SDK's warnings while the block runs: what a person running the agent reads."""
    kept = Kept()
    sdk = logging.getLogger("openai.agents")
    sdk.addHandler(kept)
    try:
        yield kept.messages
    finally:
        sdk.removeHandler(kept)


def leaves(error: BaseException) -> list[BaseException]:
    """The errors inside an exception group, however deeply nested; else the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main() -> None:
    snippet, workspace = sys.argv[1:]
    # Nothing may leave for OpenAI: runs bring their own model and trace nothing.
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    os.environ["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
    print(json.dumps(asyncio.run(session(snippet, workspace))))


if __name__ == "__main__":
    main()
