"""The board's one error root, and the codes a caller can meet.

Every failure the board means to report to a caller (a tool call, an admin request, a CLI
command) is a ``BoardError``: a ``code`` from ``ErrorCode``, a message, a ``hint`` that says
what to do, and plain ``details``. The store's, auth's and the gateway's own kinds are
subclasses that only set the defaults of their part; the gateway maps any of them to a tool
error in one place. Start-up failures (a Redis that cannot be started) are not call errors:
they are ``StartupError``, which no tool call can raise.

A leaf module: it imports nothing of the project, so every part can import it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

ErrorCode = Literal[
    "invalid_argument",
    "too_large",
    "not_found",
    "conflict",
    "forbidden",
    "unauthenticated",
    "rate_limited",
    "overloaded",
    "unavailable",
    "unconfirmed",
    "internal",
]


class BoardError(Exception):
    """Root of everything the board raises on purpose for a caller to read."""

    code: ClassVar[ErrorCode] = "internal"
    hint: ClassVar[str] = "retry later; report it if it persists"

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        if hint is not None:
            self.hint = hint  # type: ignore[misc]  # an instance's own hint shadows the class's


class Overloaded(BoardError):
    """The gateway is busy (no Redis connection came free in time, or too many calls in
    hand); Redis itself is fine. Nothing was done."""

    code = "overloaded"
    hint = "the board is busy; retry after the number of seconds in retry_after"

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message, retry_after=retry_after)


class StartupError(Exception):
    """A part the board needs could not be started (the embedded Redis, most often)."""

    hint: ClassVar[str] = "see the message; nothing was started"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint  # type: ignore[misc]


def error_codes() -> tuple[ErrorCode, ...]:
    """Every code an error can carry, in ``ErrorCode``'s order."""
    return get_args(ErrorCode)


def codes_in_use() -> set[str]:
    """The codes the ``BoardError`` classes loaded so far carry (a test holds them to
    ``error_codes()``: no class may invent a code)."""
    seen: set[str] = set()
    pending: list[type[BoardError]] = [BoardError]
    while pending:
        kind = pending.pop()
        seen.add(kind.code)
        pending.extend(kind.__subclasses__())
    return seen
