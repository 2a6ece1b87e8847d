"""Audit records: who called which tool on which addresses, with what outcome."""

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


class AuditSink(Protocol):
    async def record(self, record: AuditRecord) -> None: ...


class BatchAuditSink(AuditSink, Protocol):
    async def record_many(self, records: Sequence[AuditRecord]) -> None:
        """Store ``records`` in order, in as few round trips as the sink can."""
        ...
