"""Per-request values the HTTP edge sets and the MCP tool handlers read."""

from __future__ import annotations

from contextvars import ContextVar

from blackboard_mcp.auth import Grant

# The SDK runs the tool handler inside the request's task tree, so a value set by the
# ASGI middleware for this request is visible there and nowhere else.
current_grant: ContextVar[Grant | None] = ContextVar("current_grant", default=None)
current_request_id: ContextVar[str] = ContextVar("current_request_id", default="-")
