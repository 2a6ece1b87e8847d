"""The MCP SDK's own cost per call: a server with the gateway's transport settings and one
tool that does nothing. The gateway cannot cost less than this per call; the difference
between the two is what blackboard-mcp itself adds (auth, Redis, budgets, audit).

    python bench/_sdk_floor_server.py PORT
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    TextContent,
    Tool,
)
from starlette.applications import Starlette
from starlette.routing import Mount

_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"uris": {"type": "array"}}}
_TOOLS = [Tool(name=name, input_schema=_SCHEMA) for name in ("get_state", "update_state")]


def build() -> Starlette:
    async def list_tools(_ctx: Any, _params: Any) -> ListToolsResult:
        return ListToolsResult(tools=_TOOLS)

    async def call_tool(_ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        body = {"items": [], "spent_tokens": 0}
        return CallToolResult(
            content=[TextContent(type="text", text='{"items":[],"spent_tokens":0}')],
            structured_content=body,
        )

    server: Server[Any] = Server(
        "floor",
        get_tool_input_schema=lambda name: _SCHEMA,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    sessions = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with sessions.run():
            yield

    return Starlette(routes=[Mount("/mcp", app=sessions.handle_request)], lifespan=lifespan)


if __name__ == "__main__":
    uvicorn.run(build(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
