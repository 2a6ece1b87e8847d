"""Audit records: who called which tool on which addresses, with what outcome.

A leaf module, like errors.py: the gateway writes records, the store's adapter keeps them
in Redis and the CLI prints them, and none of them needs another's part for that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class AuditRecord:
    at: float
    workspace: str
    subject: str
    tool: str
    addresses: tuple[str, ...]
    outcome: str
    duration_ms: float
    request_id: str

    def as_line(self) -> str:
        """One tab-separated line for a terminal; no field can add a line or a column.

        Subjects are checked when tokens are issued and verified, but a stream may hold
        records from before that check, or written by anything else with access to Redis.
        """
        fields = (
            f"{self.at:.3f}",
            printable(self.subject),
            printable(self.tool),
            printable(self.outcome),
            f"{self.duration_ms:.1f}ms",
            ",".join(printable(a) for a in self.addresses),
        )
        return "\t".join(fields)


def printable(text: str) -> str:
    """``text`` with backslashes, tabs, newlines and every other control character escaped."""
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == "\t":
            out.append("\\t")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif not char.isprintable():
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


class AuditSink(Protocol):
    async def record(self, record: AuditRecord) -> None: ...


class BatchAuditSink(AuditSink, Protocol):
    async def record_many(self, records: Sequence[AuditRecord]) -> None:
        """Store ``records`` in order, in as few round trips as the sink can."""
        ...
