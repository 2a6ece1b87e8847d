"""Two agents share a board through PydanticAI's ``MCPToolset``, each driven by a scripted model.

Run by ``tests/test_framework_pydantic_ai.py`` with this folder's own environment::

    python session.py SNIPPET WORKSPACE

with ``BB_TOKEN_A`` and ``BB_TOKEN_B`` in the environment. SNIPPET is a file holding the
README's PydanticAI entry with the test gateway's endpoint in it: each agent is that code, run
with the agent's own token as ``BB_TOKEN``, and every run gets a ``FunctionModel`` in place of
the snippet's model, which is never called. Prints one JSON line: what each run's model was
handed, and what a person sees when the gateway refuses the token.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

ToolCall = tuple[str, dict[str, Any]]
# A step is a tool call, or a function of what the model was handed so far that makes one.
Step = ToolCall | Callable[[list[dict[str, Any]]], ToolCall]

# Over the gateway's 2 MiB request limit.
TOO_LARGE_BODY = "x" * (3 << 20)


class Script:
    """A ``FunctionModel`` function that makes its tool calls in order, then answers in text.

    It keeps every tool result the agent hands it, as the part itself would reach a model:
    ``content`` as the part holds it, ``text`` as a provider without a tool-error channel of
    its own (OpenAI's) is sent it.
    """

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.received: list[dict[str, Any]] = []
        self.tools: list[ToolDefinition] = []

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tools = info.function_tools
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, ToolReturnPart):
                    self.received.append(
                        {
                            "tool": part.tool_name,
                            "outcome": part.outcome,
                            "content": part.content,
                            "text": part.model_response_str(),
                        }
                    )
        if not self.steps:
            return ModelResponse(parts=[TextPart("done")])
        step = self.steps.pop(0)
        name, args = step(self.received) if callable(step) else step
        return ModelResponse(parts=[ToolCallPart(name, args)])


def snippet_with_token(snippet: str, token: str) -> dict[str, Any]:
    """What the README's code defines (``board``, ``agent``), run with ``token`` as BB_TOKEN."""
    os.environ["BB_TOKEN"] = token
    try:
        return runpy.run_path(snippet, run_name="board_snippet")
    finally:
        del os.environ["BB_TOKEN"]


def agent_with_token(snippet: str, token: str) -> Any:
    return snippet_with_token(snippet, token)["agent"]


async def run(agent: Agent[None, str], script: Script) -> dict[str, Any]:
    """One run of ``agent`` with ``script`` as its model: what the model was handed, and how
    the run ended (its output, or the exception that ended it)."""
    try:
        result = await agent.run("Work on the board.", model=FunctionModel(script))
        ended: dict[str, Any] = {"output": result.output}
    except UnexpectedModelBehavior as error:
        ended = {"error": {"type": type(error).__name__, "message": str(error)}}
    return {"received": script.received, **ended}


def described(tools: list[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "strict": t.strict, "parameters": t.parameters_json_schema} for t in tools
    ]


def current_version_from(received: list[dict[str, Any]]) -> int:
    """What a model reads off the conflict it was just handed: the note's current version."""
    error = json.loads(received[-1]["content"])["error"]
    assert error["code"] == "conflict", error
    return int(error["current_version"])


async def session(snippet: str, workspace: str) -> dict[str, Any]:
    a = agent_with_token(snippet, os.environ["BB_TOKEN_A"])
    b = agent_with_token(snippet, os.environ["BB_TOKEN_B"])
    findings = f"bb://{workspace}/notes/findings"
    plan = f"bb://{workspace}/notes/plan"
    shared = f"bb://{workspace}/notes/shared"
    contested = f"bb://{workspace}/notes/contested"

    def write(uri: str, digest: str, version: int, body: str = "") -> ToolCall:
        args = {"uri": uri, "digest": digest, "body": body or digest, "expect_version": version}
        return ("update_state", args)

    report: dict[str, Any] = {}
    report["b_writes"] = await run(
        b, Script(write(findings, "Cache misses double under the migration load", 0))
    )
    a_script = Script(
        write(plan, "Plan: move the migration to off-peak hours", 0),
        ("link_state", {"src": plan, "rel": "derived_from", "dst": [findings]}),
    )
    report["a_writes_and_links"] = await run(a, a_script)
    report["tools"] = described(a_script.tools)
    # What the snippet's own OpenAI model would send for them, prepared but not sent.
    _, prepared = a.model.prepare_request(
        None, ModelRequestParameters(function_tools=a_script.tools)
    )
    report["tools_for_openai"] = described(prepared.function_tools)
    report["b_reads_and_searches"] = await run(
        b,
        Script(
            ("get_state", {"uris": [plan], "mode": "full"}),
            ("search_keys", {"q": "migration", "topic": "notes"}),
        ),
    )
    # Both agents write the shared note expecting version 0: A first, so B's write conflicts;
    # B then writes again at the version the conflict told it.
    report["a_shared"] = await run(a, Script(write(shared, "A: ship on Tuesday", 0)))
    report["b_shared"] = await run(
        b,
        Script(
            write(shared, "B: ship on Thursday", 0),
            lambda received: write(
                shared,
                "B: ship on Thursday, after A's Tuesday dry run",
                current_version_from(received),
            ),
        ),
    )

    # Two conflicts in one run: with the snippet's setting each is a failed result the model
    # answers; with the default ("retry") the second is one retry too many and ends the run.
    await run(b, Script(write(contested, "B's first take", 0)))
    stale_twice = (write(contested, "B again", 0), write(contested, "B once more", 0))
    report["two_conflicts"] = await run(b, Script(*stale_twice))
    b_default = snippet_with_token(snippet, os.environ["BB_TOKEN_B"])
    report["snippet_tool_error_behavior"] = b_default["board"].tool_error_behavior
    b_default["board"].tool_error_behavior = "retry"
    report["two_conflicts_by_default"] = await run(b_default["agent"], Script(*stale_twice))

    report["too_large"] = await run(
        a, Script(write(f"bb://{workspace}/notes/huge", "Too big", 0, TOO_LARGE_BODY))
    )

    refused = agent_with_token(snippet, "not-a-token")
    try:
        await refused.run("Work on the board.", model=FunctionModel(Script(("list_keys", {}))))
        report["wrong_token"] = {"raised": None}
    except Exception as error:
        kind = type(error)
        report["wrong_token"] = {
            "raised": f"{kind.__module__}.{kind.__qualname__}",
            "message": str(error),
        }
    return report


def main() -> None:
    snippet, workspace = sys.argv[1:]
    # The snippet names an OpenAI model, whose provider wants a key when the agent is built.
    # No run calls it: each run brings its own FunctionModel. A base URL on a closed loopback
    # port makes sure of that.
    os.environ["OPENAI_API_KEY"] = "unused"
    os.environ["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
    print(json.dumps(asyncio.run(session(snippet, workspace))))


if __name__ == "__main__":
    main()
