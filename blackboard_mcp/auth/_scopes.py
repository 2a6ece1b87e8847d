"""Topic patterns: exact names or globs with ``*``. Matching is our own, never fnmatch,
whose ``[...]`` classes and platform case-folding would widen a scope."""

from __future__ import annotations

import re

from ._errors import InvalidScope

# 1-64 of a-z 0-9 . _ - *, never two dots in a row; said without a lookahead so that JSON
# Schema and pydantic hold a pattern to the same rule (the length is said beside it).
TOPIC_PATTERN_TEXT = r"(?:\.?[a-z0-9_*-])*\.?"
MAX_TOPIC_PATTERN = 64
_PATTERN = re.compile(TOPIC_PATTERN_TEXT)


def check_pattern(pattern: object) -> str:
    if (
        not isinstance(pattern, str)
        or not 0 < len(pattern) <= MAX_TOPIC_PATTERN
        or not _PATTERN.fullmatch(pattern)
    ):
        raise InvalidScope(f"topic pattern {pattern!r} is not a name or a glob with *")
    return pattern


def topic_matches(pattern: str, topic: str) -> bool:
    """True when ``topic`` (one path segment) matches ``pattern``; ``*`` never crosses a ``/``."""
    if "/" in topic or not topic:
        return False
    if pattern == "*":
        return True
    parts = pattern.split("*")
    if len(parts) == 1:
        return pattern == topic
    if not topic.startswith(parts[0]) or not topic.endswith(parts[-1]):
        return False
    if len(topic) < len(parts[0]) + len(parts[-1]):
        return False
    at = len(parts[0])
    end = len(topic) - len(parts[-1])
    for middle in parts[1:-1]:
        found = topic.find(middle, at, end)
        if found < 0:
            return False
        at = found + len(middle)
    return True


def pattern_covers(outer: str, inner: str) -> bool:
    """Conservatively: does every topic ``inner`` matches also match ``outer``?"""
    if outer == inner or outer == "*":
        return True
    if "*" not in inner:
        return topic_matches(outer, inner)
    # A glob inside a glob: accept only a prefix glob that extends the outer prefix glob.
    if outer.endswith("*") and outer.count("*") == 1 and inner.count("*") == 1:
        return inner.endswith("*") and inner.startswith(outer[:-1])
    return False
