"""What `serve`'s exit status means (docs/operations.md lists the same table)."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """`serve`'s exit status; 1 remains Python's own for an unexpected error."""

    STOPPED = 0
    """Stopped on SIGTERM, SIGINT or SIGHUP, the embedded Redis shut down with its AOF flushed."""
    PORT_UNAVAILABLE = 3
    """The port could not be bound (in use, or not allowed), or the gateway failed to start."""
    DATA_DIR_IN_USE = 4
    """Another `serve` holds the data dir."""
    REDIS_FAILED = 5
    """The embedded Redis could not be started, or was not back after its restarts."""


class ServeFailure(Exception):
    """`serve` cannot go on: a one-line message for the operator and the exit status."""

    def __init__(self, exit_code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
