"""The honest token budget every read applies: the whole answer fits, and says what it left out.

A read's answer is the JSON object the client receives as the tool result (its text content
is exactly ``orjson.dumps`` of it). ``spent_tokens`` is the cl100k token count of that text,
``spent_tokens`` itself included, and it never exceeds ``budget_tokens``. Items are chosen
from estimates (content by the token count stored at write time), then the finished answer
is counted exactly and trimmed until it fits; so the ceiling holds whatever the estimates
got wrong.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .._errors import InvalidArgument
from ..notes._provenance import once_per_link
from ..notes._tokencount import TokenCounter, count_as_json_string, count_json, counted_off_loop
from ..requests._read_options import MAX_BUDGET
from ._table_rows import TableRows

# The breaks a cut prefers, best first: a paragraph, a line, a sentence, a word.
_BOUNDARIES = ("\n\n", "\n", ". ", " ")
# A lone item's content is cut only if at least this many of its tokens can be shown.
MIN_CUT_TOKENS = 8


def clean_cut(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest prefix of ``text`` whose cost as a JSON string is within ``max_tokens``,
    ending at a paragraph, line, sentence or word where one keeps at least half of it.

    Always ``text[:n]`` for some ``n``: a cut never splits a character, and the text after
    it is exactly the rest. Costs are counted escaped (a control character is one raw token
    that costs several as ``\\u0001``), so the search is on what the answer carries.
    """
    # The raw count never exceeds the escaped one: no more characters than ``max_tokens``
    # raw tokens hold can fit.
    low, high = 0, len(counter.cut(text, max_tokens))
    if count_as_json_string(counter, text[:high]) <= max_tokens:
        low = high  # text that escapes to no more tokens than it has, most text
    while low < high:
        middle = (low + high + 1) // 2
        if count_as_json_string(counter, text[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    head = text[:low]
    if low >= len(text):
        return text
    for boundary in _BOUNDARIES:
        at = head.rfind(boundary)
        # Accept a boundary only if it keeps at least half of what fits.
        if at >= len(head) // 2:
            clean = head[: at + (1 if boundary == ". " else 0)].rstrip()
            if clean:
                return clean
    return head


# The envelope's own key, as the serializer writes it; a key inside an item or a string's
# text cannot look like this (a string's quotes are escaped).
_SPENT_KEY = '"spent_tokens":'


def finish(counter: TokenCounter, response: dict[str, Any]) -> int:
    """Set ``spent_tokens`` to the exact token count of ``response`` as serialized; return it.

    The count includes the number itself, so it is found as a fixed point. The rest of the
    response is counted once: cl100k's pre-tokenizer makes a number's digits tokens of their
    own (no token joins them to the ``":`` before or the ``,`` or ``}`` after), so the whole
    is the text around the number plus the number's own count, whatever the number.
    """
    response["spent_tokens"] = 0
    text = orjson.dumps(response).decode()
    key = text.find(_SPENT_KEY)
    if key != -1 and text.find(_SPENT_KEY, key + 1) == -1:
        cut = key + len(_SPENT_KEY)
        around = count_json(counter, text[:cut]) + count_json(counter, text[cut + 1 :])
        spent = around
        # Monotone in the number's width, so this climbs to the fixed point in a step or two.
        for _ in range(8):
            settled = around + counter.count(str(spent))
            if settled == spent:
                response["spent_tokens"] = spent
                return spent
            spent = settled
    return _finish_by_recounting(counter, response)


def _finish_by_recounting(counter: TokenCounter, response: dict[str, Any]) -> int:
    """``finish`` by counting the whole response until the number in it is its count."""
    spent = int(response.get("spent_tokens") or 0)
    response["spent_tokens"] = spent
    real = count_json(counter, orjson.dumps(response).decode())
    if real == spent:
        return spent
    # The number's own tokens are its digits in groups of up to three (cl100k's split
    # pattern); predict the fixed point from that, then check it by counting.
    guess = real
    for _ in range(4):
        step = real - _digit_tokens(spent) + _digit_tokens(guess)
        if step == guess:
            break
        guess = step
    spent = guess
    for _ in range(8):
        response["spent_tokens"] = spent
        real = count_json(counter, orjson.dumps(response).decode())
        if real == spent:
            return spent
        spent = real
    # Oscillating between two widths (999 <-> 1000): the larger one, padded, is honest enough
    # only if it is exact, so settle on the wider number and count once more.
    response["spent_tokens"] = spent
    real = count_json(counter, orjson.dumps(response).decode())
    response["spent_tokens"] = real
    return real


def _digit_tokens(number: int) -> int:
    return (len(str(number)) + 2) // 3


# An item of an answer opens with its address; in the answer's list the next one follows it
# after a comma. count_json cuts the answer just before each address (store/notes/
# _tokencount.py), so an item's piece runs from its address to the next item's.
_ITEM_OPENING = '{"uri":"'
_NEXT_ITEM = "," + _ITEM_OPENING


@dataclass
class Entry:
    """One item a read may show.

    ``item`` is complete except for its content field ``big`` (``body``, or ``rows`` for a
    table), whose stored token count is ``big_tokens``; ``content`` is the body's text once
    it has been fetched, ``rows`` the table's rows. ``warnings`` are about this item and are
    shown only if it is.
    """

    uri: str
    item: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    big: str | None = None
    big_tokens: int = 0
    content: str | None = None
    rows: TableRows | None = None
    columns: tuple[str, ...] | None = None  # a table's columns to show, if not all
    partial: bool = False  # the content is only the start of the whole: show it cut or not at all
    # Where a cut's rest is read: the version's address (``bb://ws/t/k@7``), to which the cut
    # adds ``#<byte offset>``; ``start`` is where the content begins in the whole text, and
    # ``total_tokens`` the whole text's count when the content is only its rest.
    rest_of: str | None = None
    start: int = 0
    total_tokens: int | None = None
    size: int = 0  # the whole text's bytes

    @property
    def fetched(self) -> bool:
        return self.content is not None or self.rows is not None

    @property
    def has_something(self) -> bool:
        """Content a cut could show some of."""
        return bool(self.content) or (self.rows is not None and bool(self.rows.cells))

    def estimate(self, counter: TokenCounter) -> int:
        text = orjson.dumps(self.item).decode()
        if text.startswith(_ITEM_OPENING):
            # Counted as the piece of the answer ``count_json`` will count: from the item's
            # address to the next item's, so counting the answer finds it counted already.
            cost = count_json(counter, text[len(_ITEM_OPENING) :] + _NEXT_ITEM)
        else:
            cost = count_json(counter, text) + 1
        if self.big is not None:
            # ``,"body":""`` plus the content as it was counted at write time.
            cost += 4 + self.big_tokens
        return cost + sum(counter.count(w) + 2 for w in self.warnings)

    def cut_report(
        self, shown_tokens: int, rest_at: int, total_tokens: int | None = None
    ) -> dict[str, Any]:
        """What a cut item says of itself: how much it shows, of how much, and where the
        rest is read (``rest_at``, a byte offset in the whole text)."""
        if total_tokens is None:
            total_tokens = self.big_tokens if self.total_tokens is None else self.total_tokens
        report: dict[str, Any] = {"shown_tokens": shown_tokens, "total_tokens": total_tokens}
        if self.rest_of is not None:
            report["rest"] = f"{self.rest_of}#{rest_at}"
        return report

    def text_rest_at(self, head: str) -> int:
        return self.start + len(head.encode())

    def rows_rest_at(self, count: int) -> int:
        assert self.rows is not None
        return self.rows.next_at[count - 1] if count else self.start

    def shown(self, cut: str | int | None = None) -> dict[str, Any]:
        """The item with its content: all of it, or a cut (a prefix of the body's text, or
        the number of a table's rows)."""
        if self.big is None:
            return self.item
        item = dict(self.item)
        if self.rows is not None or self.big == "rows":
            cells = self.rows.cells if self.rows is not None else []
            item[self.big] = cells if cut is None else cells[: int(cut)]
        elif cut is None:
            item[self.big] = self.content or ""
        else:
            item[self.big] = cut
        return item

    def longest_rest_at(self) -> int:
        """The largest offset a rest of this entry can name, for measuring room."""
        if self.rows is not None:
            return self.rows.next_at[-1] if self.rows.next_at else self.start
        return self.text_rest_at(self.content or "")


# render(shown items, their warnings, how many entries were shown) -> the response, unfinished.
Render = Callable[[list[dict[str, Any]], list[str], int], dict[str, Any]]


def plan(counter: TokenCounter, budget: int, entries: Sequence[Entry], base: int) -> int:
    """How many entries, in order, the estimates say fit beside an answer that costs ``base``.

    Order is kept: once one does not fit, the rest are left out too (a caller reading the
    omitted positions or the next page then continues where this read stopped).
    """
    total = base
    for shown, entry in enumerate(entries):
        total += entry.estimate(counter)
        if total > budget:
            return shown
    return len(entries)


@dataclass
class Fitted:
    response: dict[str, Any]
    shown: int  # entries shown, the cut one included
    cut: bool


def fit(
    counter: TokenCounter,
    budget: int,
    entries: Sequence[Entry],
    count: int,
    render: Render,
) -> Fitted:
    """The answer with the first ``count`` entries, trimmed until its exact cost fits ``budget``.

    Entries must hold their content (if they have any) for the first ``count`` of them, and for
    the first entry even when ``count`` is 0: a lone item too big for the budget is cut at a
    clean boundary instead, marked with ``cut: {shown_tokens, total_tokens}``.
    """
    fitted: dict[str, Any] | None = None
    while count > 0:
        response = _render(render, entries, count)
        if finish(counter, response) <= budget:
            fitted = response
            break
        count -= 1
    # Estimates err both ways: grow while the next entry (its content at hand) fits exactly.
    while count < len(entries) and _ready(entries[count]):
        response = _render(render, entries, count + 1)
        if finish(counter, response) > budget:
            break
        fitted, count = response, count + 1
    if fitted is not None:
        return Fitted(fitted, count, False)
    first = entries[0] if entries else None
    if first is not None and first.big is not None and first.has_something:
        cut = _cut_first(counter, budget, first, render)
        if cut is not None:
            return Fitted(cut, 1, True)
    response = render([], [], 0)
    if finish(counter, response) > budget:
        raise InvalidArgument(
            f"budget_tokens={budget} cannot hold even this read's envelope "
            f"({response['spent_tokens']} tokens)",
            argument="budget_tokens",
        )
    if first is not None:
        need = _need(counter, budget, first, render)
        response["need_budget"] = need
        if finish(counter, response) > budget:
            del response["need_budget"]
            finish(counter, response)
    return Fitted(response, 0, False)


async def fit_off_loop(
    counter: TokenCounter,
    budget: int,
    entries: Sequence[Entry],
    count: int,
    render: Render,
) -> Fitted:
    """``fit``, on a worker thread when the entries hold long content: counting the answer
    (and cutting it) would hold the event loop as counting a long write would
    (store/notes/_tokencount.py). Most of that time is a few long counts, each letting go
    of the GIL, so a busy loop does not starve the thread (a listing's many short counts
    would be: list_keys and search_keys fit on the loop). The entries and ``render`` are
    the read's own; nothing else touches them meanwhile."""
    held = sum(len(e.content or "") + (e.size if e.rows is not None else 0) for e in entries)
    return await counted_off_loop(
        held, functools.partial(fit, counter, budget, entries, count, render)
    )


def _ready(entry: Entry) -> bool:
    return entry.big is None or (entry.fetched and not entry.partial)


def _render(render: Render, entries: Sequence[Entry], count: int) -> dict[str, Any]:
    shown = entries[:count]
    warnings = once_per_link([w for e in shown for w in e.warnings])
    return render([e.shown() for e in shown], warnings, count)


def _cut_first(
    counter: TokenCounter, budget: int, entry: Entry, render: Render
) -> dict[str, Any] | None:
    if entry.rows is not None:
        return _cut_rows(counter, budget, entry, render)
    text = entry.content or ""
    empty = dict(entry.shown(""))
    # Sized as the longest the rest's address can be: what is measured here is room.
    empty["cut"] = entry.cut_report(0, entry.longest_rest_at())
    response = render([empty], list(entry.warnings), 1)
    # What the shown text may cost as a JSON string.
    room = budget - finish(counter, response) - 2
    for _ in range(12):
        if room < MIN_CUT_TOKENS:
            return None
        head = clean_cut(text, room, counter)
        if not head:
            return None
        shown = count_as_json_string(counter, head)
        item = dict(entry.shown(head))
        item["cut"] = entry.cut_report(shown, entry.text_rest_at(head))
        response = render([item], list(entry.warnings), 1)
        over = finish(counter, response) - budget
        if over <= 0:
            return response
        # The cut report's numbers, or tokens merging across the text's edges, cost more
        # than the empty item measured: shrink by that much and measure again.
        room -= over
    return None


def _cut_rows(
    counter: TokenCounter, budget: int, entry: Entry, render: Render
) -> dict[str, Any] | None:
    """The most whole rows of a table that fit, and the rest from the row after them.

    A cut table shows at least one row. The rows' own costs, added up, say how many fit
    beside the empty item; the finished answer is then counted exactly, a row fewer each
    time it is over (tokens merging across rows make the sum a close guess, not a bound).
    """
    assert entry.rows is not None
    cells = entry.rows.cells
    size = entry.size

    def answer(count: int) -> tuple[dict[str, Any], int]:
        item = dict(entry.shown(count))
        shown = count_json(counter, orjson.dumps(item[entry.big or "rows"]).decode())
        rest_at = entry.rows_rest_at(count)
        # The whole table as rows, estimated from the share of its bytes shown (its stored
        # count is of the TSV, which costs less than the same cells as lists).
        total = max(shown + 1, shown * size // max(1, rest_at - entry.start))
        item["cut"] = entry.cut_report(shown, rest_at, total)
        response = render([item], list(entry.warnings), 1)
        return response, finish(counter, response)

    _, empty = answer(0)
    room = budget - empty
    # All of them is the whole item, which did not fit, unless more rows are left unread.
    most = len(cells) if entry.partial else len(cells) - 1
    count, spent = 0, 0
    while count < most:
        spent += counter.count(orjson.dumps(cells[count]).decode()) + 1
        if spent > room:
            break
        count += 1
    # The sum may overstate (tokens merge across rows): one row is always measured.
    count = max(count, min(1, most))
    for _ in range(12):
        if count < 1:
            return None
        response, cost = answer(count)
        if cost <= budget:
            return response
        count -= max(1, (cost - budget) * count // max(1, cost - empty))
    return None


def _need(counter: TokenCounter, budget: int, first: Entry, render: Render) -> int:
    """A budget that shows at least the first entry (cut, if it has content).

    A table is cut between rows, so it needs room for its first row whole; a row longer
    than the range a budget fetches is not known yet, and twice the budget reads more of it.
    """
    if first.rows is not None:
        if not first.rows.cells:
            return min(MAX_BUDGET, 2 * budget)
        item = dict(first.shown(1))
        shown = count_json(counter, orjson.dumps(item[first.big or "rows"]).decode())
        item["cut"] = first.cut_report(shown, first.longest_rest_at())
        return finish(counter, render([item], list(first.warnings), 1))
    if first.big is not None:
        item = dict(first.shown(""))
        item["cut"] = first.cut_report(0, first.longest_rest_at())
        response = render([item], list(first.warnings), 1)
        return finish(counter, response) + MIN_CUT_TOKENS + 8
    response = render([first.item], list(first.warnings), 1)
    return finish(counter, response)


def position_ranges(positions: Sequence[int]) -> list[list[int]]:
    """``[0, 1, 2, 5]`` -> ``[[0, 2], [5, 5]]``: omitted positions, compactly."""
    ranges: list[list[int]] = []
    for p in positions:
        if ranges and ranges[-1][1] == p - 1:
            ranges[-1][1] = p
        else:
            ranges.append([p, p])
    return ranges
