"""Two LangGraph agents share a board through LangChain's MCP adapters, each driven by a script.

Run with this folder's own environment (the adapters speak mcp 1.x):

    python session.py SNIPPET WORKSPACE

SNIPPET is a file holding the README's LangGraph code with the gateway's URL in it; it is run
as it stands and its ``board_agent`` builds every agent here. The agents' tokens come in the
environment (``BB_TOKEN_A``, ``BB_TOKEN_B``), never on the command line, and are never
printed. Prints one JSON line: what each scripted model was handed back for each of its tool
calls, and what a person sees when the gateway refuses a token or a body.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_mcp_adapters.client import MultiServerMCPClient
from pydantic import Field

# A request body over the gateway's 2 MiB limit (BB_MAX_REQUEST_BYTES).
OVERSIZED_BODY = "x" * (2 * 1024 * 1024 + 1024)
# What each agent writes over version 1 of the plan; the test tells the winner by it.
REVISED = {
    "a": {"digest": "Plan, revised by A", "body": "Move the import to 02:00."},
    "b": {"digest": "Plan, revised by B", "body": "Move the import to 04:00."},
}

Turns = list[list[dict[str, Any]]]


class ScriptedModel(BaseChatModel):
    """A chat model whose answer to each prompt is fixed: one list of tool calls per turn.

    It keeps every tool message the agent hands it, as a provider would receive it, and the
    tools the agent bound, so the run shows what a real model would have seen.
    """

    script: dict[str, Turns]
    received: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        self.tools = [tool for tool in tools if isinstance(tool, BaseTool)]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt_at = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        prompt = str(messages[prompt_at].content)
        since = messages[prompt_at + 1 :]
        for message in since[len(since) - _trailing_tool_messages(since) :]:
            assert isinstance(message, ToolMessage)
            self.received.append(
                {
                    "prompt": prompt,
                    "tool": message.name,
                    "status": message.status,
                    "content": message.content,
                }
            )
        turn = sum(isinstance(m, AIMessage) for m in since)
        turns = self.script[prompt]
        if turn == len(turns):
            answer = AIMessage(content="done")
        else:
            calls = [
                ToolCall(name=call["tool"], args=call["args"], id=f"{prompt}-{turn}-{n}")
                for n, call in enumerate(turns[turn])
            ]
            answer = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=answer)])


def _trailing_tool_messages(messages: list[BaseMessage]) -> int:
    count = 0
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        count += 1
    return count


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


async def what_the_person_sees(step: Awaitable[Any]) -> dict[str, Any] | None:
    """What ``step`` raises, as a person running it would read it; None if it succeeds."""
    try:
        await step
    except Exception as error:
        return _described(error)
    return None


def _described(error: BaseException) -> dict[str, Any]:
    seen: dict[str, Any] = {"type": _name(error), "message": str(error)}
    if isinstance(error, BaseExceptionGroup):
        seen["inner"] = [_described(inner) for inner in error.exceptions]
    return seen


def _name(error: BaseException) -> str:
    return f"{type(error).__module__}.{type(error).__qualname__}"


async def main(snippet: str, workspace: str) -> dict[str, Any]:
    code = runpy.run_path(snippet)
    board_agent: Callable[[BaseChatModel], Awaitable[Any]] = code["board_agent"]
    tokens = {"a": os.environ["BB_TOKEN_A"], "b": os.environ["BB_TOKEN_B"]}
    plan = f"bb://{workspace}/notes/plan"
    finding = f"bb://{workspace}/notes/finding"
    scripts: dict[str, dict[str, Turns]] = {
        "b": {
            "record the finding": [
                [
                    call(
                        "update_state",
                        uri=finding,
                        digest="Cache misses come from the nightly import",
                        body="The nightly import evicts the hot keys.",
                        expect_version=0,
                    )
                ]
            ],
            "catch up": [
                [
                    call("get_state", uris=[plan], mode="full"),
                    call("search_keys", q="rollout", topic="notes"),
                ]
            ],
            "revise the plan": [[call("update_state", uri=plan, expect_version=1, **REVISED["b"])]],
        },
        "a": {
            "write the plan": [
                [
                    call(
                        "update_state",
                        uri=plan,
                        digest="Staged rollout plan",
                        body="Move the import to 03:00, then roll out in stages.",
                        expect_version=0,
                    )
                ],
                [call("link_state", src=plan, rel="derived_from", dst=[finding])],
            ],
            "revise the plan": [[call("update_state", uri=plan, expect_version=1, **REVISED["a"])]],
        },
    }
    models = {name: ScriptedModel(script=script) for name, script in scripts.items()}
    agents = {}
    for name, model in models.items():
        # Each agent of a fleet runs with its own token in BB_TOKEN, as the snippet reads it.
        os.environ["BB_TOKEN"] = tokens[name]
        agents[name] = await board_agent(model)

    async def run(name: str, prompt: str) -> None:
        await agents[name].ainvoke({"messages": [HumanMessage(prompt)]})

    await run("b", "record the finding")
    await run("a", "write the plan")
    await run("b", "catch up")
    # Both read version 1 of the plan and write it back at once: one of them is stale.
    await asyncio.gather(run("a", "revise the plan"), run("b", "revise the plan"))

    # The adapters' own connection, without the snippet's response hook.
    plain = MultiServerMCPClient(
        {
            "blackboard": {
                "transport": "streamable_http",
                "url": code["URL"],
                "headers": {"Authorization": "Bearer not-a-token"},
            }
        }
    )
    too_large = {"too large": [[call("update_state", uri=plan, digest="big", body=OVERSIZED_BODY)]]}
    os.environ["BB_TOKEN"] = "not-a-token"
    refused = {"token": await what_the_person_sees(board_agent(ScriptedModel(script={})))}
    refused["token without the hook"] = await what_the_person_sees(plain.get_tools())
    os.environ["BB_TOKEN"] = tokens["a"]
    oversized = await board_agent(ScriptedModel(script=too_large))
    refused["body"] = await what_the_person_sees(
        oversized.ainvoke({"messages": [HumanMessage("too large")]})
    )

    update_state = next(t for t in models["a"].tools if t.name == "update_state")
    return {
        "bound": {name: sorted(t.name for t in model.tools) for name, model in models.items()},
        "received": {name: model.received for name, model in models.items()},
        "refused": refused,
        "update_state_required": {
            "default": convert_to_openai_tool(update_state)["function"]["parameters"]["required"],
            "strict": convert_to_openai_tool(update_state, strict=True)["function"]["parameters"][
                "required"
            ],
        },
    }


if __name__ == "__main__":
    snippet_path, workspace_name = sys.argv[1:]
    print(json.dumps(asyncio.run(main(snippet_path, workspace_name))))
