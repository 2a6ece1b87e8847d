"""search_keys' request: the caller's text, an optional topic and a limit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import InvalidArgument, TooLarge
from ..notes._addresses import Address, validate_name
from ..notes._notes import require_text

MAX_QUERY_CHARS = 10_000
MAX_SEARCH_LIMIT = 50
DEFAULT_SEARCH_LIMIT = 10


@dataclass(frozen=True, slots=True)
class SearchKeys:
    q: str
    topic: str | None = None
    limit: int = DEFAULT_SEARCH_LIMIT

    @property
    def reads(self) -> tuple[Address, ...]:
        return ()

    @property
    def writes(self) -> tuple[Address, ...]:
        return ()

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> SearchKeys:
        text = require_text(args.get("q"), "q")
        if len(text) > MAX_QUERY_CHARS:
            raise TooLarge(
                f"q has {len(text)} characters; the limit is {MAX_QUERY_CHARS}", argument="q"
            )
        limit = args.get("limit")
        if limit is None:
            limit = DEFAULT_SEARCH_LIMIT
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_SEARCH_LIMIT
        ):
            raise InvalidArgument(
                f"limit must be a whole number from 1 to {MAX_SEARCH_LIMIT}", argument="limit"
            )
        topic = args.get("topic")
        return cls(text, None if topic is None else validate_name(topic, "topic"), limit)
