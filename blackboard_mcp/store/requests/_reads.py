"""get_state's and list_keys' requests: what to read, in which mode, under which budget."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from .._errors import InvalidArgument
from ..notes._addresses import SCHEME, Address, parse_address, validate_name
from ..notes._notes import KINDS, NoteKind
from ._page_keys import Row, decode
from ._read_options import (
    DEFAULT_BUDGET,
    GET_MODES,
    LIST_MODES,
    ORDERS,
    Mode,
    Order,
    check_budget,
    check_fields,
    check_list_fields,
    check_mode,
)

MAX_URIS = 100
MAX_LIST_LIMIT = 200
DEFAULT_LIST_LIMIT = 20
ListMode = Literal["digest", "table", "ref"]


@dataclass(frozen=True, slots=True)
class GetState:
    """``uris`` as given (a repeat answered once, at its first place), one workspace."""

    uris: tuple[Address, ...]
    mode: Mode = "digest"
    fields: tuple[str, ...] = ()
    budget_tokens: int = DEFAULT_BUDGET

    @property
    def workspace(self) -> str:
        return self.uris[0].workspace

    @property
    def reads(self) -> tuple[Address, ...]:
        return self.uris

    @property
    def writes(self) -> tuple[Address, ...]:
        return ()

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> GetState:
        uris = args.get("uris")
        if isinstance(uris, str):
            uris = [uris]
        if not isinstance(uris, list | tuple) or not uris:
            raise InvalidArgument("uris must be a non-empty list of addresses", argument="uris")
        if len(uris) > MAX_URIS:
            raise InvalidArgument(f"at most {MAX_URIS} uris per call", argument="uris")
        given = tuple(parse_address(u, argument="uris") for u in uris)
        if len({a.workspace for a in given}) > 1:
            raise InvalidArgument("all uris of one call must be in one workspace", argument="uris")
        mode = check_mode(args.get("mode"), GET_MODES)
        fields = check_fields(args.get("fields"))
        if mode == "fields" and not fields:
            raise InvalidArgument("mode=fields needs fields=[...]", argument="fields")
        return cls(given, mode, fields, check_budget(args.get("budget_tokens")))


@dataclass(frozen=True, slots=True)
class ListKeys:
    """A page of a topic (or of every readable topic), or of its changes since ``cursor``."""

    topic: str | None = None
    kind: NoteKind | None = None
    order: Order = "recent"
    limit: int = DEFAULT_LIST_LIMIT
    mode: ListMode = "digest"
    fields: tuple[str, ...] = ()
    budget_tokens: int = DEFAULT_BUDGET
    cursor: int | None = None
    after: Row | None = None
    # topic= a note's address: the page lists that note's versions.
    note: Address | None = None

    @property
    def feed(self) -> str:
        """What the page walks: a note's versions, the change feed after ``cursor``, or the
        notes in ``order``."""
        if self.note is not None:
            return "history"
        return "changes" if self.cursor is not None else self.order

    @property
    def reads(self) -> tuple[Address, ...]:
        return () if self.note is None else (self.note,)

    @property
    def writes(self) -> tuple[Address, ...]:
        return ()

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> ListKeys:
        topic = args.get("topic")
        note = None
        if isinstance(topic, str) and topic.startswith(SCHEME):
            note = parse_address(topic, argument="topic").require_note("topic")
            if args.get("cursor") is not None or args.get("kind") is not None:
                raise InvalidArgument(
                    "a note's versions take no cursor or kind; page them with after=next",
                    argument="topic",
                )
            topic = None
        checked_topic = None if topic is None else validate_name(topic, "topic")
        # check_mode has held it to LIST_MODES, the values of ListMode.
        mode = cast(ListMode, check_mode(args.get("mode"), LIST_MODES))
        fields = check_list_fields(check_fields(args.get("fields")))
        budget = check_budget(args.get("budget_tokens"))
        order = _check_order(args.get("order"))
        limit = _check_limit(args.get("limit"))
        cursor = _check_cursor(args.get("cursor"))
        feed = "history" if note is not None else "changes" if cursor is not None else order
        after = decode(feed, args.get("after"))
        kind = args.get("kind")
        if kind is not None and kind not in KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(KINDS)}", argument="kind")
        return cls(
            checked_topic,
            kind,
            order,
            limit,
            mode,
            fields,
            budget,
            cursor,
            after,
            note,
        )


def _check_order(value: object) -> Order:
    if value is None:
        return "recent"
    if value not in ORDERS:
        raise InvalidArgument(f"order must be one of {', '.join(ORDERS)}", argument="order")
    return value


def _check_limit(value: object) -> int:
    if value is None:
        return DEFAULT_LIST_LIMIT
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIST_LIMIT:
        raise InvalidArgument(
            f"limit must be a whole number from 1 to {MAX_LIST_LIMIT}", argument="limit"
        )
    return value


def _check_cursor(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument("cursor must be a cursor from an earlier read", argument="cursor")
    return value
