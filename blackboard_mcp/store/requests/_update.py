"""update_state's request: every argument checked and typed before any I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import InvalidArgument
from ..notes._addresses import Address, parse_address
from ..notes._notes import (
    check_confidence,
    check_digest,
    check_expect_version,
    check_sources,
    require_text,
)
from ..notes._tables import Table, build_table


@dataclass(frozen=True, slots=True)
class UpdateState:
    """One write: exactly one content form (body, table, append, source_path) or none.

    Sizes against the board's limits are the board's to check (``BoardLimits``); everything
    else a call may get wrong is refused here, naming the argument.
    """

    uri: Address
    digest: str
    body: str | None = None
    source_path: str | None = None
    table: Table | None = None
    append: str | None = None
    expect_version: int | None = None
    sources: tuple[Address, ...] = ()
    confidence: float | None = None

    @property
    def reads(self) -> tuple[Address, ...]:
        return self.sources

    @property
    def writes(self) -> tuple[Address, ...]:
        return (self.uri,)

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> UpdateState:
        address = parse_address(args.get("uri")).require_note("uri")
        source_path = args.get("source_path")
        body, columns, rows, append = (args.get(n) for n in ("body", "columns", "rows", "append"))
        if source_path is not None:
            if any(v is not None for v in (body, columns, rows, append)):
                raise InvalidArgument(
                    "source_path replaces body, columns+rows and append; give only one",
                    argument="source_path",
                )
            if not isinstance(source_path, str) or not source_path.strip():
                raise InvalidArgument(
                    "source_path must be a non-empty string", argument="source_path"
                )
        digest = check_digest(args.get("digest"))
        forms = [
            name
            for name, given in (
                ("body", body is not None),
                ("columns+rows", columns is not None or rows is not None),
                ("append", append is not None),
            )
            if given
        ]
        if not forms and source_path is None:
            # Without one, the write would empty the note's content unasked.
            raise InvalidArgument(
                "give the note's content: one of body, columns+rows, append or source_path "
                '(body "" for a note that is only its digest)',
                argument="body",
            )
        if len(forms) > 1:
            raise InvalidArgument(
                f"give one of body, columns+rows, append or source_path, not {' and '.join(forms)}",
                argument=forms[1].split("+")[0],
            )
        table = None
        if columns is not None or rows is not None:
            if columns is None or rows is None:
                raise InvalidArgument("a table needs both columns and rows", argument="columns")
            table = build_table(columns, rows)
        text_body = require_text(body, "body") if body is not None else None
        text_append = None
        if append is not None:
            text_append = require_text(append, "append")
            if not text_append:
                raise InvalidArgument("append is empty", argument="append")
        version = check_expect_version(args.get("expect_version"))
        if text_append is not None and version is not None:
            raise InvalidArgument(
                "append does not take expect_version: it always extends the latest version",
                argument="expect_version",
            )
        return cls(
            uri=address,
            digest=digest,
            body=text_body,
            source_path=source_path,
            table=table,
            append=text_append,
            expect_version=version,
            sources=check_sources(args.get("sources"), address.workspace),
            confidence=check_confidence(args.get("confidence")),
        )
