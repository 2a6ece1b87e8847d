"""The MCP server: the SDK's low-level server with our five hand-written tool schemas.

The low-level server is used rather than MCPServer's decorators so that the schemas sent in
``tools/list`` are exactly the budgeted ones in _schemas.py, and so that argument checking
and errors stay ours (MCPServer would answer bad arguments with pydantic's text).
"""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel import Server
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult

from blackboard_mcp import __version__

from ._calls import ToolCaller
from ._context import current_grant, current_request_id
from ._resources import BoardResources, rpc_error
from ._schemas import HEADER_SCHEMAS, TOOLS
from ._tools import TOOLS_BY_NAME
from .listening import BoardListen, Listens

# Sent once, at the handshake, where the tools' descriptions are sent every turn: what
# holds for the whole board goes here.
INSTRUCTIONS = (
    "A shared board of versioned notes. Search before deriving (an empty search means "
    "nothing on the board relates); read digests first; write with expect_version."
)


def build_mcp_server(caller: ToolCaller, listens: Listens) -> Server[Any]:
    async def list_tools(_ctx: Any, _params: Any) -> ListToolsResult:
        return ListToolsResult(tools=list(TOOLS))

    async def call_tool(_ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        outcome = await caller.call(
            params.name, params.arguments or {}, current_grant.get(), current_request_id.get()
        )
        if outcome.is_error and params.name not in TOOLS_BY_NAME:
            # The spec answers a call of an unknown tool with a JSON-RPC error (invalid
            # params), not a tool result; it is still audited and counted, by the caller.
            raise rpc_error(outcome.body["error"])
        # One definition of the result's shape for both paths (see _direct.py).
        return CallToolResult.model_validate(outcome.wire())

    resources = BoardResources(caller)
    return Server(
        "blackboard-mcp",
        version=__version__,
        instructions=INSTRUCTIONS,
        # Without this the SDK runs the whole tools/list handler on every 2026-07-28 call to
        # find the schema it checks Mcp-Param headers against: a fifth of such a call's cost.
        get_tool_input_schema=HEADER_SCHEMAS.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # Resources cost no tools/list tokens: notes read whole, and change notifications.
        on_list_resources=resources.list_resources,
        on_list_resource_templates=resources.list_templates,
        on_read_resource=resources.read_resource,
        on_subscriptions_listen=BoardListen(listens),
    )
