"""The one place where project exceptions become tool errors with stable codes."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from blackboard_mcp.errors import BoardError, ErrorCode, Overloaded, error_codes

log = logging.getLogger(__name__)

# Every code a tool error can carry; documented in the README's error table.
ERROR_CODES = error_codes()


class GatewayError(BoardError):
    """Root of the gateway's own refusals."""

    code: ClassVar[ErrorCode] = "invalid_argument"
    hint: ClassVar[str] = "fix the call and try again"


class UnknownTool(GatewayError):
    """The tool name is not one of the five."""

    hint = "use update_state, get_state, list_keys, search_keys or link_state"


class UnknownArgument(GatewayError):
    """The call names an argument the tool does not take."""

    hint = "check the argument names in the tool's schema"


class RateLimited(GatewayError):
    """The token made more calls this minute than its limit."""

    code = "rate_limited"
    hint = "slow down; retry after the number of seconds in retry_after"


class TooManyInFlight(Overloaded):
    """This gateway process already has its limit of calls in hand (BB_MAX_IN_FLIGHT)."""


def tool_error(exc: BaseException, request_id: str) -> dict[str, Any]:
    """The structured error body for ``exc``; unexpected errors are logged, never shown."""
    if isinstance(exc, BoardError):
        code: str = exc.code
        message = exc.message or str(exc)
        hint = exc.hint
        details = {k: v for k, v in exc.details.items() if _is_plain(v)}
    else:
        log.error("unexpected error in request %s", request_id, exc_info=exc)
        code = "internal"
        message = f"internal error (request {request_id})"
        hint = "retry; if it persists, report the request id to the operator"
        details = {}
    return {"error": {"code": code, "message": message, "hint": hint, **details}}


def _is_plain(value: object) -> bool:
    return isinstance(value, str | int | float | bool) or (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    )
