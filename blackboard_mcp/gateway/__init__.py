"""The HTTP edge: MCP over Streamable HTTP at ``/mcp/``, health, readiness and metrics."""

from ._app import GatewayParts, create_app
from ._errors import ERROR_CODES, GatewayError, RateLimited, UnknownArgument, UnknownTool
from ._logs import JsonFormatter, configure_logging
from ._oauth_metadata import MCP_PATH
from ._schemas import TOOL_NAMES, TOOLS

__all__ = [
    "ERROR_CODES",
    "MCP_PATH",
    "TOOLS",
    "TOOL_NAMES",
    "GatewayError",
    "GatewayParts",
    "JsonFormatter",
    "RateLimited",
    "UnknownArgument",
    "UnknownTool",
    "configure_logging",
    "create_app",
]
