"""Turn stored note fields into the items reads return, per mode.

Items are built from the note's small fields first; content (a body or a table) is fetched
afterwards, and only for the items the budget shows (see _reads.py).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ..requests._read_options import CONTENT_FIELDS, ITEM_FIELDS, Mode
from ._budget import Entry

# A read whose note keeps moving on between its round trips (fields, then content) reads it
# again this many times; past that it is refused rather than shown torn.
READ_ATTEMPTS = 8

# Digest and ref items need only these; every field a reply parses costs (redis-py parses in
# Python), so a listing does not ask for the rest.
# A note's address is not stored: every read knows it and adds it (``uri``).
BRIEF_FIELDS = [
    "digest",
    "version",
    "est_tokens",
    "kind",
    "updated",
    "body_tokens",
    # For the warnings that say a source has moved on (store/notes/_provenance.py).
    "sources",
    "source_at",
]

# What the first round trip of a read asks of the note hash: everything but the content.
META_FIELDS = [
    *BRIEF_FIELDS,
    "blob",
    "author",
    "created",
    "confidence",
    "columns",
    "nrows",
    "seq",
    "size",
    "origin",
]


def fields_for(mode: Mode, fields: Sequence[str]) -> list[str]:
    return BRIEF_FIELDS if mode in ("digest", "ref") and not fields else META_FIELDS


Readable = Callable[[str], bool]


def every_topic(_topic: str) -> bool:
    """The ``Readable`` of a caller who may read every topic of the workspace.

    Pass this very function (not an equivalent one) and search leaves its topic filter out
    of the query, which halves the cost of a search that matches many notes.
    """
    return True


# A note's times are read far more often than they change: each stored text formatted once.
@functools.lru_cache(maxsize=8192)
def iso_time(ms: str) -> str:
    if not ms:
        return ""
    try:
        moment = dt.datetime.fromtimestamp(int(ms) / 1000, tz=dt.UTC)
    except (ValueError, OverflowError, OSError):
        # A time no read can show (outside years 1 to 9999): writes and imports store none.
        return ""
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def is_table(note: dict[str, str]) -> bool:
    return note.get("kind") == "table" or bool(note.get("columns"))


def build_entry(
    note: dict[str, str],
    *,
    mode: Mode,
    fields: Sequence[str],
    links: list[dict[str, str]],
    warnings: list[str],
    readable: Readable,
) -> Entry:
    """The item for one note in ``mode``, its content left to fetch (``Entry.big``)."""
    uri = note["uri"]
    if mode == "fields":
        return _fields_entry(note, fields, links, warnings, readable)
    item: dict[str, Any] = {
        "uri": uri,
        "digest": note["digest"],
        "version": int(note["version"]),
        "est_tokens": int(note["est_tokens"]),
    }
    entry = Entry(uri, item, warnings)
    if mode == "ref":
        return entry
    item["kind"] = note["kind"]
    if mode == "digest":
        item["updated"] = iso_time(note["updated"])
        return entry
    body_tokens = int(note.get("body_tokens") or 0)
    table = is_table(note)
    if mode == "table":
        if not table:
            warnings.append(f"{uri} is not a table; read it with mode=full")
            return entry
        item["columns"] = _select_columns(entry, note, fields)
        entry.big, entry.big_tokens = "rows", body_tokens
        return entry
    item.update(_metadata(note, links, readable))
    entry.big, entry.big_tokens = ("rows" if table else "body"), body_tokens
    return entry


def part_entry(note: dict[str, str], *, uri: str, mode: Mode, fields: Sequence[str]) -> Entry:
    """The item for a part of a note (``...@7#5120``): its address and content only; the
    note's fields, links and warnings came with the part that named this one."""
    entry = Entry(uri, {"uri": uri})
    table = is_table(note)
    columns = [f for f in fields if f not in ITEM_FIELDS] if mode in ("fields", "table") else []
    if mode == "table" and not table:
        entry.warnings.append(f"{uri} is not a table; read it with mode=full")
        return entry
    if mode == "table" and not fields:
        columns = []
    elif mode == "fields" and not columns and ("rows" if table else "body") not in fields:
        return entry
    if table and columns:
        _select_columns(entry, note, columns)
    entry.big = "rows" if table else "body"
    entry.big_tokens = int(note.get("body_tokens") or 0)
    return entry


def _fields_entry(
    note: dict[str, str],
    fields: Sequence[str],
    links: list[dict[str, str]],
    warnings: list[str],
    readable: Readable,
) -> Entry:
    """mode=fields: the address and exactly the named fields; other names are table columns."""
    uri = note["uri"]
    values: dict[str, Any] = {
        "uri": uri,
        "digest": note["digest"],
        "version": int(note["version"]),
        "est_tokens": int(note["est_tokens"]),
        "kind": note["kind"],
        "updated": iso_time(note["updated"]),
        **_metadata(note, links, readable),
    }
    item: dict[str, Any] = {"uri": uri}
    entry = Entry(uri, item, warnings)
    table = is_table(note)
    columns = [f for f in fields if f not in ITEM_FIELDS]
    for name in fields:
        if name in CONTENT_FIELDS:
            if (name == "rows") == table and entry.big is None:
                entry.big, entry.big_tokens = name, int(note.get("body_tokens") or 0)
            else:
                item[name] = None
        elif name in ITEM_FIELDS:
            item[name] = values.get(name, [] if name in ("sources", "links") else None)
            if name == "sources" and "sources_hidden" in values:
                item["sources_hidden"] = values["sources_hidden"]
    if columns:
        if not table:
            warnings.append(f"{uri}: no field {', '.join(columns)}")
        elif entry.big is None or entry.big == "rows":
            # The rows hold just the chosen columns, and ``columns`` says which.
            item["columns"] = _select_columns(entry, note, columns)
            entry.big, entry.big_tokens = "rows", int(note.get("body_tokens") or 0)
    return entry


def stored_columns(note: dict[str, str]) -> list[str]:
    columns = orjson.loads(note["columns"]) if note.get("columns") else []
    return [c for c in columns if isinstance(c, str)] if isinstance(columns, list) else []


def _select_columns(entry: Entry, note: dict[str, str], columns: Sequence[str]) -> list[str]:
    """The columns a table read shows: ``columns`` of the table's (all when none are named)."""
    stored = stored_columns(note)
    if not columns:
        return stored
    missing = [c for c in columns if c not in stored]
    if missing:
        entry.warnings.append(f"{entry.uri} has no column {', '.join(missing)}")
    entry.columns = tuple(c for c in columns if c in stored)
    return list(entry.columns)


def _topic_of(uri: str) -> str | None:
    """The topic of a stored source, ``bb://<workspace>/<topic>/<path>``; None for a value
    that is not one (writes and imports store only addresses, but what Redis hands back is
    read as untrusted)."""
    parts = uri.split("/", 4)
    return parts[3] if len(parts) == 5 and parts[0] == "bb:" and parts[3] else None


def _stored_sources(note: dict[str, str]) -> list[str]:
    try:
        sources = orjson.loads(note["sources"]) if note.get("sources") else []
    except orjson.JSONDecodeError:
        return []
    return [s for s in sources if isinstance(s, str)] if isinstance(sources, list) else []


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
    sources = _stored_sources(note)
    # A source in a topic the reader may not read would leak that note's name; the reader
    # learns only that such sources exist.
    shown = [s for s in sources if (topic := _topic_of(s)) is not None and readable(topic)]
    if shown:
        meta["sources"] = shown
    if len(shown) < len(sources):
        meta["sources_hidden"] = len(sources) - len(shown)
    if links:
        meta["links"] = links
    if note.get("confidence"):
        meta["confidence"] = float(note["confidence"])
    if note.get("columns"):
        meta["columns"] = stored_columns(note)
        meta["nrows"] = int(note.get("nrows") or 0)
    if note.get("origin"):
        meta["origin"] = note["origin"]
    return meta
