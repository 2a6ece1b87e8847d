"""An audit record named for the operation that was asked for, not the tool whose checks it ran.

A ``subscriptions/listen`` is admitted by get_state's call on the addresses it follows (same
scopes, revocation and rate checks), with a topic standing in as a note of that topic
(``bb://ws/topic/_``). Its audit record must still say what happened: a listen, of the notes
and topics the client named. The listen sets ``audited_as`` around that call, and the sink the
tool caller writes through renames the call's record.
"""

from __future__ import annotations

import dataclasses
from contextvars import ContextVar
from dataclasses import dataclass

from blackboard_mcp.auth import AuditRecord, AuditSink


@dataclass(frozen=True)
class AuditedAs:
    """The operation and addresses a call's audit record names instead of its own."""

    tool: str
    addresses: tuple[str, ...]


# Set in the request's own task, around the one call it renames; the caller records the call
# before it returns, in that same task, so no other call's record sees it.
audited_as: ContextVar[AuditedAs | None] = ContextVar("audited_as", default=None)


class RenamingAudit:
    """An ``AuditSink`` that writes each record through, renamed if ``audited_as`` is set."""

    def __init__(self, sink: AuditSink) -> None:
        self._sink = sink

    async def record(self, record: AuditRecord) -> None:
        renamed = audited_as.get()
        if renamed is not None:
            record = dataclasses.replace(record, tool=renamed.tool, addresses=renamed.addresses)
        await self._sink.record(record)
