"""Two Google ADK agents share a board through the README's McpToolset, each model scripted.

Run with this folder's environment: ``python session.py SNIPPET WORKSPACE``, the agents'
tokens in ``BB_TOKEN_A`` and ``BB_TOKEN_B``. SNIPPET is the README entry's Python block with
the gateway's URL in it: agent A is its ``researcher`` with the model swapped for a scripted
one, and agent B gets its tools from the snippet's ``board_tools``. Each agent runs through
ADK's ``Runner`` with an in-memory session service; no model service is reached.

Agent B writes a note; agent A writes one, links it to B's and starts a plan; B reads A's
notes and searches; then both rewrite the plan from version 1, A first, so B's write is the
conflict. Then a write too large for the gateway, the schemas as a Gemini model is given them
under ADK's older conversion, and the same toolset with a token the gateway refuses.

Prints one JSON line: each tool call with exactly what ADK handed the model for it, the tool
declarations and system instruction the model was given, and what a person sees for the
refusals. Tokens are never printed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import runpy
import sys
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.features import FeatureName, override_feature_enabled
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.mcp_tool import McpToolset
from google.genai import types
from pydantic import Field

APP = "board"
USER = "fleet"
# Over the gateway's 2 MiB request limit once wrapped in the JSON-RPC call.
OVERSIZED_BODY = "x" * (2 * 1024 * 1024 + 1)


class ScriptedModel(BaseLlm):
    """A model that makes the calls it is given, one per request, and keeps what it is handed.

    ``handed`` maps each call's id to the function response ADK put in the next request:
    exactly what a real model would read for that call.
    """

    model: str = "scripted"
    script: list[types.FunctionCall] = Field(default_factory=list)
    handed: dict[str, Any] = Field(default_factory=dict)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        for part in llm_request.contents[-1].parts or []:
            if part.function_response is not None:
                self.handed[str(part.function_response.id)] = part.function_response.response
        if self.script:
            call = self.script.pop(0)
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)])
            )
        else:
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))


class Agent:
    """One agent, its scripted model and its own session, run one user turn at a time."""

    def __init__(self, agent: LlmAgent, model: ScriptedModel, sessions: InMemorySessionService):
        self.name = agent.name
        self.model = model
        self.sessions = sessions
        self.runner = Runner(agent=agent, app_name=APP, session_service=sessions)
        self.session_id: str | None = None
        self.calls = 0

    async def turn(self, *calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """Runs one turn in which the model makes ``calls`` in order, then answers."""
        if self.session_id is None:
            session = await self.sessions.create_session(app_name=APP, user_id=USER)
            self.session_id = session.id
        made = []
        for tool, args in calls:
            self.calls += 1
            made.append(types.FunctionCall(id=f"{self.name}-{self.calls}", name=tool, args=args))
        self.model.script = list(made)
        message = types.Content(role="user", parts=[types.Part(text="Work on the board.")])
        async for _ in self.runner.run_async(
            user_id=USER, session_id=self.session_id, new_message=message
        ):
            pass
        assert not self.model.script, f"{self.name} made only part of its turn"
        return [
            {"agent": self.name, "tool": call.name, "handed": self.model.handed[str(call.id)]}
            for call in made
        ]


def declarations(request: LlmRequest) -> dict[str, dict[str, Any]]:
    """The function declarations in ``request``, by name, as the model is given them."""
    found = {}
    for tool in request.config.tools or []:
        for declaration in getattr(tool, "function_declarations", None) or []:
            found[declaration.name] = declaration.model_dump(
                mode="json", exclude_none=True, exclude={"name"}
            )
    return found


class Collected(logging.Handler):
    """Keeps the messages ADK logs at ERROR, which is where a person reads what went wrong."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def main(snippet: str, workspace: str) -> dict[str, Any]:
    token_a, token_b = os.environ["BB_TOKEN_A"], os.environ["BB_TOKEN_B"]
    # The snippet reads its agent's token from BB_TOKEN, as a person's program would.
    os.environ["BB_TOKEN"] = token_a
    readme = runpy.run_path(snippet)
    os.environ.pop("BB_TOKEN")
    logged = Collected()
    logging.getLogger("google_adk").addHandler(logged)

    sessions = InMemorySessionService()
    model_a, model_b = ScriptedModel(), ScriptedModel()
    researcher: LlmAgent = readme["researcher"]
    a = Agent(researcher.clone(update={"name": "agent_a", "model": model_a}), model_a, sessions)
    b = Agent(
        LlmAgent(name="agent_b", model=model_b, tools=[readme["board_tools"](token_b)]),
        model_b,
        sessions,
    )

    def uri(topic: str, key: str) -> str:
        return f"bb://{workspace}/{topic}/{key}"

    sources, finding, plan = uri("notes", "sources"), uri("findings", "latency"), uri("plan", "q3")
    calls = []
    calls += await b.turn(
        (
            "update_state",
            {
                "uri": sources,
                "digest": "Three traces of slow billing calls",
                "body": "Traces 17, 23 and 41 all wait on the billing retry queue.",
                "expect_version": 0,
            },
        )
    )
    calls += await a.turn(
        (
            "update_state",
            {
                "uri": finding,
                "digest": "Billing latency comes from the retry queue",
                "body": "Every slow trace waits on the retry queue; its backoff is fixed at 2 s.",
                "expect_version": 0,
            },
        ),
        ("link_state", {"src": finding, "rel": "derived_from", "dst": [sources]}),
        (
            "update_state",
            {
                "uri": plan,
                "digest": "Q3 plan: shorten the retry backoff",
                "body": "1. Make the backoff exponential.",
                "expect_version": 0,
            },
        ),
    )
    calls += await b.turn(
        ("get_state", {"uris": [finding, plan], "mode": "full"}),
        ("search_keys", {"q": "retry queue"}),
    )
    # Both read the plan at version 1; A writes first, so B's write is the stale one.
    calls += await a.turn(
        (
            "update_state",
            {
                "uri": plan,
                "digest": "Q3 plan: exponential backoff, then a queue limit",
                "body": "1. Make the backoff exponential.\n2. Cap the retry queue.",
                "expect_version": 1,
            },
        )
    )
    calls += await b.turn(
        (
            "update_state",
            {
                "uri": plan,
                "digest": "Q3 plan: exponential backoff, then more traces",
                "body": "1. Make the backoff exponential.\n2. Collect a week of traces.",
                "expect_version": 1,
            },
        )
    )
    [oversized] = await a.turn(
        (
            "update_state",
            {"uri": uri("notes", "dump"), "digest": "Too large", "body": OVERSIZED_BODY},
        )
    )
    first_request = model_a.requests[0]
    seen = {
        "declarations": declarations(first_request),
        "system_instruction": first_request.config.system_instruction,
    }

    # ADK's older conversion, to Gemini's own Schema objects, still behind a feature switch.
    override_feature_enabled(FeatureName.JSON_SCHEMA_FOR_FUNC_DECL, False)
    model_c = ScriptedModel()
    legacy = Agent(
        LlmAgent(name="agent_c", model=model_c, tools=[readme["board_tools"](token_a)]),
        model_c,
        sessions,
    )
    await legacy.turn()
    override_feature_enabled(FeatureName.JSON_SCHEMA_FOR_FUNC_DECL, True)
    gemini_schemas = declarations(model_c.requests[0])

    refused_model = ScriptedModel()
    refused_tools: McpToolset = readme["board_tools"]("not-a-token")
    refused = Agent(
        LlmAgent(name="agent_refused", model=refused_model, tools=[refused_tools]),
        refused_model,
        sessions,
    )
    logged.messages.clear()
    [refused_call] = await refused.turn(("list_keys", {"topic": "notes"}))
    refused_log = list(logged.messages)
    try:
        await refused_tools.get_tools()
        get_tools: dict[str, str] = {}
    except Exception as error:
        get_tools = {"type": type(error).__name__, "message": str(error)}

    for agent in (a, b, legacy, refused):
        await agent.runner.close()
    for toolset in researcher.tools:
        assert isinstance(toolset, McpToolset)
        await toolset.close()
    return {
        "calls": calls,
        "seen": seen,
        "gemini_schemas": gemini_schemas,
        "oversized": {"handed": oversized["handed"]},
        "refused": {
            "handed": refused_call["handed"],
            "tools_offered": sorted(declarations(refused_model.requests[0])),
            "logged": refused_log,
            "get_tools": get_tools,
        },
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
