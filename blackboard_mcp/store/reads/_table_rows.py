"""A table note's rows from a byte range of its stored TSV, in the shape update_state takes.

A table is stored as one header line and one line per row (store/notes/_tables.py), so any
byte range of it holds whole rows between line breaks. A read takes the rows whose lines lie
whole inside the range it fetched, and for each the byte offset where the next row starts:
that is where a cut's rest reads on, in the stored table, whichever columns are shown. Only
the rows fetched are parsed; a part of a large table costs what it shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TableRows:
    """Whole rows of a table: their cells (the chosen columns) and, per row, the byte offset
    in the stored TSV where the row after it starts."""

    cells: list[list[str]]
    next_at: list[int]


def rows_in_range(
    data: bytes,
    *,
    offset: int,
    start: int,
    size: int,
    picked: Sequence[int] | None,
    width: int,
) -> tuple[TableRows, bool]:
    """The rows of ``data`` (the stored TSV from byte ``offset`` on) from byte ``start``.

    ``start`` 0 is the table's first row (the header line is skipped); a ``start`` that is not
    the first byte of a row (``offset`` is one byte before it, so that can be told) reads from
    the next row. ``picked`` are the column positions to keep (all when None); a stored row
    narrower than ``width`` columns is padded with empty cells. Returns the rows and whether
    the range stopped before the table's end (its last, unfinished row left out).
    """
    at = start - offset
    if start == 0 or at <= 0 or data[at - 1 : at] != b"\n":
        # The header line, or the rest of a row the offset fell inside.
        newline = data.find(b"\n", max(at, 0))
        at = len(data) if newline < 0 else newline + 1
    reaches_end = offset + len(data) >= size
    cells: list[list[str]] = []
    next_at: list[int] = []
    while at < len(data) or (at == len(data) and _ends_on_an_empty_row(data, at, reaches_end)):
        newline = data.find(b"\n", at)
        if newline < 0:
            if not reaches_end:
                break
            line, after = data[at:], len(data)
        else:
            line, after = data[at:newline], newline + 1
        row = line.decode("utf-8", "replace").split("\t")
        if len(row) < width:
            row += [""] * (width - len(row))
        cells.append(row if picked is None else [row[i] for i in picked])
        next_at.append(offset + after)
        at = after
        if newline < 0:
            break
    return TableRows(cells, next_at), not reaches_end


def _ends_on_an_empty_row(data: bytes, at: int, reaches_end: bool) -> bool:
    """A table whose last row is one empty cell ends in a line break: that row is there."""
    return reaches_end and at > 0 and data[at - 1 : at] == b"\n"
