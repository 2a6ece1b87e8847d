"""Turn stored note fields into the items reads return, per mode."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, Literal

import orjson

from ._budget import Candidate
from ._errors import InvalidArgument
from ._tables import parse_tsv

Mode = Literal["digest", "fields", "table", "full", "ref"]
GET_MODES: tuple[Mode, ...] = ("digest", "fields", "table", "full", "ref")
LIST_MODES: tuple[Mode, ...] = ("digest", "table", "ref")
MAX_FIELDS = 32

# Metadata a caller may name in ``fields``; any other name is taken as a table column.
METADATA_FIELDS = (
    "kind",
    "author",
    "created",
    "updated",
    "size",
    "confidence",
    "sources",
    "seq",
    "columns",
    "rows",
    "links",
    "origin",
)

# What each mode needs from the note hash (``body`` is the expensive one).
_BASE = ["uri", "digest", "version", "est_tokens", "kind", "updated", "body_tokens"]
_FULL = [
    *_BASE,
    "body",
    "blob",
    "author",
    "created",
    "sources",
    "confidence",
    "columns",
    "nrows",
    "seq",
    "size",
    "origin",
]
FIELDS_BY_MODE: dict[str, list[str]] = {
    "ref": _BASE,
    "digest": _BASE,
    "table": [*_BASE, "body", "blob", "columns"],
    "full": _FULL,
    "fields": _FULL,
}

Readable = Callable[[str], bool]


def every_topic(_topic: str) -> bool:
    """The ``Readable`` of a caller who may read every topic of the workspace.

    Pass this very function (not an equivalent one) and search leaves its topic filter out
    of the query, which halves the cost of a search that matches many notes.
    """
    return True


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
    return tuple(value)


def iso_time(ms: str) -> str:
    if not ms:
        return ""
    moment = dt.datetime.fromtimestamp(int(ms) / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def needs_body(mode: Mode, fields: Sequence[str]) -> bool:
    if mode in ("full", "table"):
        return True
    return mode == "fields" and any(f not in METADATA_FIELDS for f in fields)


def build_candidate(
    note: dict[str, str],
    *,
    mode: Mode,
    fields: Sequence[str],
    body: str,
    links: list[dict[str, str]],
    warnings: list[str],
    readable: Readable,
) -> Candidate:
    """The item for one note in ``mode``; ``body`` is the full content if the mode needs it."""
    uri = note["uri"]
    item: dict[str, Any] = {
        "uri": uri,
        "digest": note["digest"],
        "version": int(note["version"]),
        "est_tokens": int(note["est_tokens"]),
    }
    if mode == "ref":
        return Candidate(uri, item)
    item["kind"] = note["kind"]
    if mode == "digest":
        item["updated"] = iso_time(note["updated"])
        return Candidate(uri, item)
    is_table = note["kind"] == "table" or bool(note.get("columns"))
    body_tokens = int(note.get("body_tokens") or 0)
    if mode == "table":
        if not is_table:
            warnings.append(f"{uri} is not a table; read it with mode=full")
            return Candidate(uri, item)
        item["table"] = body
        return Candidate(uri, item, "table", body_tokens)
    if mode == "full":
        item.update(_metadata(note, links, readable))
        key = "table" if is_table else "body"
        item[key] = body
        return Candidate(uri, item, key, body_tokens)
    # mode == "fields"
    metadata = _metadata(note, links, readable)
    columns = [f for f in fields if f not in METADATA_FIELDS]
    for name in fields:
        if name in METADATA_FIELDS:
            item[name] = metadata.get(name, [] if name in ("sources", "links") else None)
    if columns:
        if not is_table:
            warnings.append(
                f"{uri}: {', '.join(columns)} are not metadata fields and it is not a table"
            )
        else:
            table = parse_tsv(body)
            missing = [c for c in columns if c not in table.columns]
            if missing:
                warnings.append(f"{uri} has no column {', '.join(missing)}")
            present = [c for c in columns if c in table.columns]
            if present:
                item["table"] = table.to_tsv(present)
    return Candidate(uri, item)


def _topic_of(uri: str) -> str:
    # Stored sources are validated addresses: bb://<workspace>/<topic>/<path>.
    return uri.split("/", 4)[3]


def _metadata(
    note: dict[str, str], links: list[dict[str, str]], readable: Readable
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "kind": note["kind"],
        "author": note.get("author", ""),
        "created": iso_time(note.get("created", "")),
        "updated": iso_time(note.get("updated", "")),
        "size": int(note.get("size") or 0),
        "seq": int(note.get("seq") or 0),
    }
    sources = orjson.loads(note["sources"]) if note.get("sources") else []
    # A source in a topic the reader may not read would leak that note's name; the reader
    # learns only that such sources exist.
    shown = [s for s in sources if readable(_topic_of(s))]
    if shown:
        meta["sources"] = shown
    if len(shown) < len(sources):
        meta["sources_hidden"] = len(sources) - len(shown)
    if links:
        meta["links"] = links
    if note.get("confidence"):
        meta["confidence"] = float(note["confidence"])
    if note.get("columns"):
        meta["columns"] = orjson.loads(note["columns"])
        meta["rows"] = int(note.get("nrows") or 0)
    if note.get("origin"):
        meta["origin"] = note["origin"]
    return meta
