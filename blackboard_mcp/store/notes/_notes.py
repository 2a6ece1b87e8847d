"""What a note is, and the checks of a write's arguments (store/requests uses them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .._errors import InvalidArgument, TooLarge
from ._addresses import Address, parse_address
from ._tables import Table

NoteKind = Literal["text", "table", "summary"]
KINDS: tuple[NoteKind, ...] = ("text", "table", "summary")

MAX_DIGEST_CHARS = 1000
MAX_SOURCES = 64
MAX_AUTHOR_CHARS = 128

# Every field a note hash holds. Reads ask for subsets of these with HMGET.
NOTE_FIELDS = (
    "uri",
    "ws",
    "topic",
    "kind",
    "digest",
    "body",
    "blob",
    "size",
    "version",
    "author",
    "created",
    "updated",
    "sources",
    "confidence",
    "seq",
    "est_tokens",
    "digest_tokens",
    "body_tokens",
    "columns",
    "nrows",
    "origin",
    "source_at",
)


def require_text(value: object, argument: str) -> str:
    """A string that is valid Unicode all the way down (no lone surrogates)."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{argument} must be a string", argument=argument)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{argument} is not valid UTF-8 text", argument=argument) from exc
    return value


def check_digest(digest: object) -> str:
    if digest is None or digest == "":
        raise InvalidArgument(
            "a digest is required: one or two sentences saying what the note holds",
            argument="digest",
        )
    text = require_text(digest, "digest")
    if not text.strip():
        raise InvalidArgument("the digest is blank", argument="digest")
    if len(text) > MAX_DIGEST_CHARS:
        raise TooLarge(
            f"the digest has {len(text)} characters; the limit is {MAX_DIGEST_CHARS}",
            argument="digest",
            hint="keep the digest a short summary and put detail in the body",
        )
    return text


def check_expect_version(value: object) -> int | None:
    if value is None:
        return None
    # bool is an int in Python; a True here is a caller bug, not version 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument("expect_version must be a whole number", argument="expect_version")
    if value < 0:
        raise InvalidArgument(
            "expect_version must be 0 (create only) or a version you read",
            argument="expect_version",
        )
    return value


def check_confidence(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument("confidence must be a number from 0 to 1", argument="confidence")
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidArgument("confidence must be from 0 to 1", argument="confidence")
    return float(value)


def check_sources(value: object, workspace: str) -> tuple[Address, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise InvalidArgument("sources must be a list of bb:// addresses", argument="sources")
    if len(value) > MAX_SOURCES:
        raise TooLarge(f"{len(value)} sources; the limit is {MAX_SOURCES}", argument="sources")
    parsed = tuple(parse_address(v, argument="sources") for v in value)
    for address in parsed:
        if address.workspace != workspace:
            raise InvalidArgument(
                f"source {address.uri} is in another workspace", argument="sources"
            )
    return parsed


@dataclass(frozen=True)
class NoteWrite:
    """A validated update_state: exactly one content form, or none (a digest-only note)."""

    address: Address
    digest: str
    author: str
    body: str | None = None
    table: Table | None = None
    append: str | None = None
    expect_version: int | None = None
    sources: tuple[Address, ...] = ()
    confidence: float | None = None
    kind: NoteKind = "text"
    origin: str = ""  # for source_path summaries: the file, relative to the source root
    warnings: list[str] = field(default_factory=list)


def check_sizes(
    *, body: str | None, table: Table | None, append: str | None, max_body_bytes: int
) -> None:
    """The content's size against the board's limit (``BoardLimits.max_body_bytes``)."""
    if body is not None:
        _check_size(body, "body", max_body_bytes)
    if append is not None:
        _check_size(append, "append", max_body_bytes)
    if table is not None:
        _check_size(table.to_tsv(), "rows", max_body_bytes)


def _check_size(text: str, argument: str, limit: int) -> None:
    size = len(text.encode("utf-8"))
    if size > limit:
        raise TooLarge(
            f"{argument} is {size} bytes; the limit is {limit}",
            argument=argument,
        )


def source_uris(sources: Sequence[Address]) -> list[str]:
    return [s.uri for s in sources]
