"""A note's place in a listing, and the opaque ``next`` text a caller hands back as ``after``
(store/reads/_paging.py walks the pages)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._errors import InvalidArgument

_LETTERS = {"recent": "r", "name": "n", "version": "v", "changes": "c", "history": "h"}
_AFTER = re.compile(r"([rnvch])(\d{1,19}):([a-z0-9][a-z0-9._-]{0,63})/(\S{1,1100})")


@dataclass(frozen=True, order=True)
class Row:
    """A note's place in a listing: compared by ``key`` only."""

    key: tuple[float, str, str]
    topic: str
    path: str
    score: int


def make_row(feed: str, topic: str, path: str, score: float) -> Row:
    value = int(score)
    if feed == "changes":
        return Row((value, topic, path), topic, path, value)
    return Row((-value, topic, path), topic, path, value)


def encode(feed: str, row: Row) -> str:
    return f"{_LETTERS[feed]}{row.score}:{row.topic}/{row.path}"


def decode(feed: str, value: object) -> Row | None:
    if value is None:
        return None
    match = _AFTER.fullmatch(value) if isinstance(value, str) else None
    if match is None or match.group(1) != _LETTERS[feed]:
        raise InvalidArgument(
            "after must be the next value of an earlier list_keys call with the same "
            "order and cursor",
            argument="after",
        )
    return make_row(feed, match.group(3), match.group(4), int(match.group(2)))
