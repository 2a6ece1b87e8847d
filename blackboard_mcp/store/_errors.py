"""The store's exceptions. Each carries a stable ``code`` and a ``hint`` for the caller."""

from __future__ import annotations

from typing import Any, ClassVar

from blackboard_mcp.errors import BoardError, ErrorCode, StartupError
from blackboard_mcp.errors import Overloaded as _Overloaded


class StoreError(BoardError):
    """Root of everything the store raises on purpose."""


class InvalidArgument(StoreError):
    """An argument is malformed: bad address, missing digest, wrong table shape, ..."""

    code: ClassVar[ErrorCode] = "invalid_argument"
    hint: ClassVar[str] = "fix the named argument and call again"


class TooLarge(InvalidArgument):
    """A value exceeds a documented size limit."""

    code = "too_large"
    hint = "shorten it, split it over several notes, or use source_path"


class NotFound(StoreError):
    """The named note does not exist."""

    code = "not_found"
    hint = "check the address with list_keys or search_keys"


class Conflict(StoreError):
    """expect_version did not match: someone else wrote first. Nothing was written."""

    code = "conflict"
    hint = "read the note again, merge, and retry with the current version"

    def __init__(
        self,
        message: str,
        *,
        current_version: int,
        current_digest: str | None,
        yours: bool = False,
    ) -> None:
        # The digest is left out for a caller that may write the topic but not read it.
        details: dict[str, Any] = {"current_version": current_version}
        if current_digest is not None:
            details["current_digest"] = current_digest
        if yours:
            # The current version is this very write, by this author: a retry whose first
            # try landed. Said only then, so an agent can stop rather than write it twice.
            details["yours"] = True
            message += "; it is your own write, with this content, already done"
        hint = "nothing to do: your write landed; go on from current_version" if yours else None
        super().__init__(message, hint=hint, **details)
        self.current_version = current_version
        self.current_digest = current_digest
        self.yours = yours


class Contended(StoreError):
    """The transaction kept losing races past its retry bound."""

    code = "conflict"
    hint = "too many concurrent writers on this note; back off and retry"


class Unavailable(StoreError):
    """Redis cannot be reached or answered with a server-side failure."""

    code = "unavailable"
    hint = "the board's database is unreachable; retry in a few seconds"


class Unconfirmed(StoreError):
    """The write committed on the primary, but fewer replicas than asked confirmed it in time."""

    code = "unconfirmed"
    hint = (
        "the write may or may not have been applied (a failover now could lose it): read the "
        "note to see its version before writing again"
    )


class Overloaded(_Overloaded, StoreError):
    """No Redis connection came free in time: this gateway is busy, Redis itself is fine."""


class EmbeddedRedisError(StartupError):
    """The embedded Redis could not be found or started."""

    hint = "install blackboard-mcp[embedded] or set BB_REDIS_URL"
