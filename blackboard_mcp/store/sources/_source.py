"""Server-side reading and summarising of a file named by ``update_state(source_path=...)``.

The point of ``source_path`` is that a file's content never passes through an agent's context:
the server reads the file under the operator's ``BB_SOURCE_ROOT`` and stores a short,
deterministic, extractive summary (or a sample table for CSV/TSV) instead. Deterministic so
that writing the same file twice yields the same note, byte for byte.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from .._errors import InvalidArgument
from ..notes._tables import MAX_CELL_CHARS, MAX_COLUMNS, Table, build_table
from ._confined import read_confined, supported

_ARG = "source_path"
SAMPLE_ROWS = 20
MAX_JSON_KEYS = 50
JSON_PREVIEW_CHARS = 60
MAX_HEADINGS = 30
MAX_FIRST_LINES = 15
LINE_CHARS = 200
MAX_BODY_CHARS = 4000
BINARY_PROBE_BYTES = 8192
_TRUNCATED = "[summary truncated]"
# ATX headings only: setext headings need look-behind and are rare in notes worth summarising.
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_ESCAPES = str.maketrans({"\t": "\\t", "\n": "\\n", "\r": "\\r"})


@dataclass(frozen=True)
class SourceSummary:
    kind: Literal["summary", "table"]
    relative_path: str  # relative to the source root, forward slashes on every platform
    body: str | None  # text summary (kind "summary")
    table: Table | None  # sample rows (kind "table")
    size_bytes: int
    sha256: str
    line_count: int  # text lines; for a table, the number of data rows in the whole file


def summarize_source(source_path: str, *, root: Path | None, max_bytes: int) -> SourceSummary:
    """Read ``source_path`` under ``root`` and summarise it; every refusal names source_path.

    Blocking: it opens and reads a file. The board calls it on a worker thread.
    """
    if root is None:
        raise InvalidArgument(
            "source_path is disabled on this board: the operator has not set BB_SOURCE_ROOT",
            argument=_ARG,
            # Nothing the caller can fix in the argument: say who can, and what works now.
            hint="send the content as body instead, or ask the board's operator to set "
            "BB_SOURCE_ROOT",
        )
    if not supported():
        raise InvalidArgument(
            "source_path is not available on this platform (no O_NOFOLLOW opens by directory)",
            argument=_ARG,
        )
    name = _check_argument(source_path)
    read = read_confined(root, name, max_bytes=max_bytes)
    data = read.data
    if b"\x00" in data[:BINARY_PROBE_BYTES]:
        raise InvalidArgument("binary files are not summarised", argument=_ARG)
    text = _decode(data)
    suffix = PurePosixPath(read.relative_path).suffix.lower()
    return _summarise(text, read.relative_path, suffix, data)


# --- locating the file ------------------------------------------------------------------------


def _check_argument(source_path: str) -> str:
    if not source_path.strip():
        raise InvalidArgument("source_path must be a non-empty string", argument=_ARG)
    if "\x00" in source_path:
        raise InvalidArgument("source_path may not contain a NUL character", argument=_ARG)
    return source_path


def _decode(data: bytes) -> str:
    try:
        # utf-8-sig: a leading byte-order mark would otherwise end up in titles and headers.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(
            "not UTF-8 text", argument=_ARG, byte_offset=exc.start, hint="convert it to UTF-8"
        ) from None


# --- summarising ------------------------------------------------------------------------------


def _summarise(text: str, relative: str, suffix: str, data: bytes) -> SourceSummary:
    size = len(data)
    digest = hashlib.sha256(data).hexdigest()
    if suffix in (".csv", ".tsv"):
        sample = _csv_sample(text, "\t" if suffix == ".tsv" else ",")
        if sample is not None:
            table, data_rows = sample
            return SourceSummary("table", relative, None, table, size, digest, data_rows)
    lines = _count_lines(text)
    if suffix == ".json":
        body = _json_summary(text, relative, size)
    else:
        body = _text_summary(text, relative, size)
    return SourceSummary("summary", relative, body, None, size, digest, lines)


def _count_lines(text: str) -> int:
    # A final line without a trailing newline still counts; an empty file has none.
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fit(lines: list[str]) -> str:
    """Join lines, dropping whole lines from the end so the body stays under the limit."""
    body = "\n".join(lines)
    if len(body) < MAX_BODY_CHARS:
        return body
    kept: list[str] = []
    used = len(_TRUNCATED)
    for line in lines:
        if used + len(line) + 1 >= MAX_BODY_CHARS:
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join([*kept, _TRUNCATED])


# --- plain text and markdown ------------------------------------------------------------------


def _headings(lines: list[str]) -> list[str]:
    """ATX headings in order, skipping fenced code so a ``# comment`` there is not a heading."""
    found: list[str] = []
    fence: str | None = None
    for line in lines:
        opened = _FENCE.match(line)
        if opened is not None:
            marker = opened.group(1)
            fence = marker if fence is None else (None if marker == fence else fence)
            continue
        if fence is not None:
            continue
        match = _HEADING.match(line)
        if match is not None and match.group(2):
            found.append(f"{match.group(1)} {match.group(2).strip()}")
    return found


def _text_summary(text: str, relative: str, size: int) -> str:
    lines = text.splitlines()
    non_empty = [line.rstrip() for line in lines if line.strip()]
    headings = _headings(lines)
    if headings:
        title = headings[0].lstrip("#").strip()
    else:
        title = non_empty[0].strip() if non_empty else "(none)"
    out = [
        f"{relative}: {_count_lines(text)} lines, {size} bytes",
        f"title: {_cut(title, LINE_CHARS)}",
    ]
    out.append("headings:" if headings else "headings: (none)")
    out.extend(f"  {_cut(h, LINE_CHARS)}" for h in headings[:MAX_HEADINGS])
    out.append("first lines:" if non_empty else "first lines: (none)")
    out.extend(f"  {_cut(line, LINE_CHARS)}" for line in non_empty[:MAX_FIRST_LINES])
    return _fit(out)


# --- JSON -------------------------------------------------------------------------------------


def _json_type(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null"


def _describe(value: object) -> str:
    """One line: type, a size where one exists, and a short preview of strings."""
    if isinstance(value, dict):
        return f"object ({len(value)} keys)"
    if isinstance(value, list):
        return f"array (length {len(value)})"
    if isinstance(value, str):
        # json.dumps keeps the preview on one line and shows where it starts and ends.
        preview = json.dumps(value[:JSON_PREVIEW_CHARS], ensure_ascii=False)
        return f"string (length {len(value)}) {_storable(preview)}"
    return _json_type(value)


def _key(name: str) -> str:
    return _storable(json.dumps(_cut(name, JSON_PREVIEW_CHARS), ensure_ascii=False))


def _storable(text: str) -> str:
    # JSON's "\ud800" escapes decode to lone surrogates, which no UTF-8 string can hold (the
    # write would fail deep in the store); they are shown as their escape instead.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _json_summary(text: str, relative: str, size: int) -> str:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            argument=_ARG,
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except RecursionError:
        raise InvalidArgument("JSON nested too deeply to summarise", argument=_ARG) from None
    except ValueError as exc:
        # Not a syntax error but a value Python refuses, e.g. an integer longer than
        # sys.get_int_max_str_digits() (CVE-2020-10735's guard): still the file's fault.
        reason = str(exc).split(";")[0]  # the rest advises a server-side setting
        raise InvalidArgument(
            f"JSON value cannot be read: {_cut(reason, LINE_CHARS)}", argument=_ARG
        ) from None
    if isinstance(value, dict):
        return _fit(_json_object_lines(value, relative, size))
    if isinstance(value, list):
        return _fit(_json_array_lines(value, relative, size))
    return _fit(
        [f"{relative}: JSON {_json_type(value)}, {size} bytes", f"value: {_describe(value)}"]
    )


def _json_object_lines(value: dict[str, object], relative: str, size: int) -> list[str]:
    out = [f"{relative}: JSON object with {len(value)} keys, {size} bytes", "keys:"]
    items = list(value.items())
    out.extend(f"  {_key(k)}: {_describe(v)}" for k, v in items[:MAX_JSON_KEYS])
    if len(items) > MAX_JSON_KEYS:
        out.append(f"  ... and {len(items) - MAX_JSON_KEYS} more keys")
    return out


def _json_array_lines(value: list[object], relative: str, size: int) -> list[str]:
    out = [f"{relative}: JSON array of length {len(value)}, {size} bytes"]
    if not value:
        return out
    first = value[0]
    out.append(f"first element: {_describe(first)}")
    if isinstance(first, dict):
        keys = [_key(k) for k in list(first)[:MAX_JSON_KEYS]]
        more = len(first) - len(keys)
        out.append(
            "first element keys: " + ", ".join(keys) + (f", ... {more} more" if more else "")
        )
    return out


# --- CSV and TSV ------------------------------------------------------------------------------


def _escape(cell: str) -> str:
    # Tables forbid raw tabs and line breaks; the two-character escapes are the documented form.
    return _cut(cell.translate(_ESCAPES), MAX_CELL_CHARS)


def _column_names(header: list[str]) -> list[str]:
    """Header cells as unique, non-empty names, since build_table insists on both."""
    names: list[str] = []
    taken: set[str] = set()
    for index, raw in enumerate(header[:MAX_COLUMNS]):
        base = _escape(raw.strip()) or f"column_{index + 1}"
        name, n = base, 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        names.append(name)
        taken.add(name)
    return names


def _csv_sample(text: str, delimiter: str) -> tuple[Table, int] | None:
    """The header and the first data rows, or None when there is no usable header."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader, None)
        if header is None or not any(cell.strip() for cell in header):
            return None
        width = min(len(header), MAX_COLUMNS)
        sample: list[list[str]] = []
        count = 0
        for row in reader:
            if not row:  # a blank line is not a data row
                continue
            count += 1
            if len(sample) < SAMPLE_ROWS:
                padded = [*row[:width], *([""] * (width - len(row)))]
                sample.append([_escape(cell) for cell in padded])
    except csv.Error as exc:
        raise InvalidArgument(
            f"malformed CSV near line {reader.line_num}: {exc}", argument=_ARG
        ) from None
    return build_table(_column_names(header), sample), count
