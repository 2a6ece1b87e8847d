"""The honest token budget every read applies: what was shown, what was left out, what it cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ._errors import InvalidArgument
from ._tokencount import TokenCounter, count_as_json_string

MIN_BUDGET = 16
MAX_BUDGET = 100_000
DEFAULT_BUDGET = 2000
# The breaks a cut prefers, best first: a paragraph, a line, a sentence, a word.
_BOUNDARIES = ("\n\n", "\n", ". ", " ")


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


def clean_cut(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest prefix within ``max_tokens`` that ends at a paragraph, line, sentence or word."""
    head = counter.cut(text, max_tokens)
    if len(head) >= len(text):
        return text
    for boundary in _BOUNDARIES:
        at = head.rfind(boundary)
        # Accept a boundary only if it keeps at least half of what fits.
        if at >= len(head) // 2:
            return head[: at + (1 if boundary == ". " else 0)].rstrip()
    return head


@dataclass
class Candidate:
    """One item ready to show: its JSON, the tokens of its big text field, and a way to cut it."""

    uri: str
    item: dict[str, Any]
    big_field: str | None = None  # "body" or "table", counted separately
    big_tokens: int = 0


@dataclass
class BudgetedRead:
    budget: int
    counter: TokenCounter
    items: list[dict[str, Any]] = field(default_factory=list)
    omitted_uris: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    spent: int = 0
    truncated: bool = False

    def _cost(self, candidate: Candidate) -> int:
        if candidate.big_field is None:
            return self.counter.count(orjson.dumps(candidate.item).decode()) + 1
        small = {k: v for k, v in candidate.item.items() if k != candidate.big_field}
        return self.counter.count(orjson.dumps(small).decode()) + candidate.big_tokens + 4

    def offer(self, candidate: Candidate, envelope_tokens: int) -> None:
        """Add ``candidate`` if it fits; once one does not, everything after is omitted."""
        if self.omitted_uris:
            self.omitted_uris.append(candidate.uri)
            return
        room = self.budget - envelope_tokens - self.spent
        cost = self._cost(candidate)
        if cost <= room:
            self.items.append(candidate.item)
            self.spent += cost
            return
        if not self.items and candidate.big_field is not None:
            self._cut_into(candidate, room)
            return
        self.truncated = True
        self.omitted_uris.append(candidate.uri)

    def _cut_into(self, candidate: Candidate, room: int) -> None:
        # A lone item bigger than the whole budget is cut at a clean boundary and marked,
        # so the caller sees its start and knows exactly how much it did not see.
        assert candidate.big_field is not None
        small = {k: v for k, v in candidate.item.items() if k != candidate.big_field}
        small_cost = self.counter.count(orjson.dumps(small).decode()) + 24
        text = str(candidate.item[candidate.big_field])
        if room - small_cost < 8:
            self.truncated = True
            self.omitted_uris.append(candidate.uri)
            return
        limit = room - small_cost
        head = clean_cut(text, limit, self.counter)
        shown = count_as_json_string(self.counter, head)
        if shown > limit:
            # Escapes (newlines, tabs, quotes) cost more than the raw text the cut measured.
            head = clean_cut(text, 2 * limit - shown, self.counter)
            shown = count_as_json_string(self.counter, head)
        item = dict(candidate.item)
        item[candidate.big_field] = head
        item["cut"] = {"shown_tokens": shown, "total_tokens": candidate.big_tokens}
        self.items.append(item)
        self.spent += small_cost + shown
        self.truncated = True

    def response(self, cursor: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"items": self.items}
        if extra:
            out.update(extra)
        out.update(
            {
                "spent_tokens": 0,
                "truncated": self.truncated or bool(self.omitted_uris),
                "omitted": len(self.omitted_uris),
                "omitted_uris": self.omitted_uris,
                "cursor": cursor,
            }
        )
        if self.warnings:
            out["warnings"] = self.warnings
        out["spent_tokens"] = self.spent + envelope_cost(self.counter, out, exclude=("items",))
        return out


def envelope_cost(
    counter: TokenCounter, response: dict[str, Any], exclude: tuple[str, ...] = ()
) -> int:
    """Tokens of the response without its items (they are counted as they are added)."""
    shell = {k: ([] if k in exclude else v) for k, v in response.items()}
    return counter.count(orjson.dumps(shell).decode())


# Tokens reserved for the envelope (cursor, flags, warnings) while items are being added.
ENVELOPE_RESERVE = 48
