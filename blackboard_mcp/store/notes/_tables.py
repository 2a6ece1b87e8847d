"""Table notes: ``columns`` + ``rows`` stored and returned as tab-separated values.

Cells may not contain a raw tab, newline or carriage return: a caller that needs one writes
the two-character escapes ``\\t`` ``\\n`` ``\\r``, which are stored and returned as written, so
the TSV is always one header line plus one line per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._errors import InvalidArgument, TooLarge

MAX_COLUMNS = 64
MAX_ROWS = 10_000
MAX_CELL_CHARS = 4096
_FORBIDDEN = ("\t", "\n", "\r")


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def to_tsv(self, columns: Sequence[str] | None = None) -> str:
        if columns is None:
            picked = list(range(len(self.columns)))
        else:
            picked = [self.columns.index(c) for c in columns if c in self.columns]
        lines = ["\t".join(self.columns[i] for i in picked)]
        lines.extend("\t".join(row[i] for i in picked) for row in self.rows)
        return "\n".join(lines)


def _cell(value: object, where: str) -> str:
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str | int | float):
        text = str(value)
    else:
        raise InvalidArgument(
            f"{where} must be text, a number, a boolean or null, not {type(value).__name__}",
            argument="rows",
        )
    if any(ch in text for ch in _FORBIDDEN):
        raise InvalidArgument(
            f"{where} contains a raw tab or line break; write it escaped as \\t or \\n",
            argument="rows",
        )
    if len(text) > MAX_CELL_CHARS:
        raise TooLarge(
            f"{where} has {len(text)} characters; the limit is {MAX_CELL_CHARS}", argument="rows"
        )
    return text


def build_table(columns: object, rows: object) -> Table:
    """Validate a table argument; any fault names the row and column."""
    if not isinstance(columns, list | tuple) or not columns:
        raise InvalidArgument("columns must be a non-empty list of names", argument="columns")
    if len(columns) > MAX_COLUMNS:
        raise TooLarge(f"{len(columns)} columns; the limit is {MAX_COLUMNS}", argument="columns")
    names = tuple(_cell(c, f"column {i}") for i, c in enumerate(columns))
    if any(not n for n in names):
        raise InvalidArgument("column names may not be empty", argument="columns")
    if len(set(names)) != len(names):
        raise InvalidArgument("column names must be unique", argument="columns")
    if not isinstance(rows, list | tuple):
        raise InvalidArgument("rows must be a list of lists", argument="rows")
    if len(rows) > MAX_ROWS:
        raise TooLarge(f"{len(rows)} rows; the limit is {MAX_ROWS}", argument="rows")
    built: list[tuple[str, ...]] = []
    for r, row in enumerate(rows):
        if not isinstance(row, list | tuple):
            raise InvalidArgument(f"row {r} must be a list of cells", argument="rows")
        if len(row) != len(names):
            raise InvalidArgument(
                f"row {r} has {len(row)} cells but there are {len(names)} columns",
                argument="rows",
            )
        built.append(tuple(_row_cell(v, r, names[c]) for c, v in enumerate(row)))
    return Table(names, tuple(built))


def _row_cell(value: object, row: int, column: str) -> str:
    # A plain text that needs nothing done is most cells of a table up to 10,000 rows long:
    # checked inline, without the fault's wording, which is made only for a fault.
    if (
        type(value) is str
        and len(value) <= MAX_CELL_CHARS
        and "\t" not in value
        and "\n" not in value
        and "\r" not in value
    ):
        return value
    return _cell(value, f"row {row} column {column!r}")


def parse_tsv(text: str) -> Table:
    """Inverse of ``Table.to_tsv`` for text the store wrote itself."""
    header, *lines = text.split("\n")
    return Table(tuple(header.split("\t")), tuple(tuple(line.split("\t")) for line in lines))
