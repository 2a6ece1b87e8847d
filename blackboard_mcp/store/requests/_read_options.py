"""What a read may ask for, checked once where its request is parsed: a mode, fields, a
token budget, an order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from .._errors import InvalidArgument

Mode = Literal["digest", "fields", "table", "full", "ref"]
GET_MODES: tuple[Mode, ...] = ("digest", "fields", "table", "full", "ref")
LIST_MODES: tuple[Mode, ...] = ("digest", "table", "ref")
MAX_FIELDS = 32

# Every key an item of a read can hold, and so every name ``fields`` accepts (``cut`` and
# ``error`` aside: they report on the item). ``sources_hidden`` comes with ``sources``. In
# mode=fields any other name is a column of a table note.
ITEM_FIELDS = (
    "uri",
    "digest",
    "version",
    "est_tokens",
    "kind",
    "updated",
    "author",
    "created",
    "size",
    "seq",
    "confidence",
    "sources",
    "links",
    "columns",
    "nrows",
    "origin",
    "body",
    "rows",
)
# A text note's content is its ``body``; a table's is its ``rows``, lists of cells in the
# order of its ``columns`` (the shape update_state takes).
CONTENT_FIELDS = ("body", "rows")
# What a listing can show as a column: one value per note, no content.
LIST_FIELDS = tuple(f for f in ITEM_FIELDS if f not in (*CONTENT_FIELDS, "sources", "links"))

# The smallest budget a read accepts: room for the empty envelope of any read (flags, counts,
# a cursor, the no-topic warning of list_keys, ``need_budget``) with some to spare.
MIN_BUDGET = 100
MAX_BUDGET = 100_000
DEFAULT_BUDGET = 2000

Order = Literal["recent", "name", "version"]
ORDERS: tuple[Order, ...] = ("recent", "name", "version")


def check_mode(value: object, allowed: Sequence[Mode]) -> Mode:
    if value is None:
        return "digest"
    if value not in allowed:
        raise InvalidArgument(f"mode must be one of {', '.join(allowed)}", argument="mode")
    return value  # type: ignore[return-value]


def check_fields(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(f, str) for f in value):
        raise InvalidArgument("fields must be a list of names", argument="fields")
    if len(value) > MAX_FIELDS:
        raise InvalidArgument(f"at most {MAX_FIELDS} fields", argument="fields")
    return tuple(dict.fromkeys(value))


def check_list_fields(fields: Sequence[str]) -> tuple[str, ...]:
    unknown = [f for f in fields if f not in LIST_FIELDS]
    if unknown:
        raise InvalidArgument(
            f"list_keys cannot show {', '.join(unknown)}; fields: {', '.join(LIST_FIELDS)}",
            argument="fields",
        )
    return tuple(fields)


def check_budget(value: object) -> int:
    if value is None:
        return DEFAULT_BUDGET
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument("budget_tokens must be a whole number", argument="budget_tokens")
    if not MIN_BUDGET <= value <= MAX_BUDGET:
        raise InvalidArgument(
            f"budget_tokens must be from {MIN_BUDGET} to {MAX_BUDGET}", argument="budget_tokens"
        )
    return value
