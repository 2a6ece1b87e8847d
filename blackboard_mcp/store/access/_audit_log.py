"""The per-workspace audit stream (capped), written by the gateway for every call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from blackboard_mcp.audit import AuditRecord

from ..connection._placement import Placement


def _key(workspace: str) -> str:
    return f"bbau:{{{workspace}}}"


def _fields(record: AuditRecord) -> dict[Any, Any]:
    return {
        "at": record.at,
        "sub": record.subject,
        "tool": record.tool,
        "addresses": orjson.dumps(list(record.addresses)),
        "outcome": record.outcome,
        "ms": record.duration_ms,
        "rid": record.request_id,
    }


class RedisAuditLog:
    def __init__(self, *, redis: Placement, maxlen: int) -> None:
        self._redis = redis
        self._client = redis.client
        self._maxlen = maxlen

    async def record(self, record: AuditRecord) -> None:
        await self.record_many([record])

    async def record_many(self, records: Sequence[AuditRecord]) -> None:
        if not records:
            return
        async with self._redis.operation():
            # Each workspace's stream on the node of its slot; one round trip on one Redis.
            await self._redis.send([self._xadd(record) for record in records], repeatable=False)

    def _xadd(self, record: AuditRecord) -> tuple[Any, ...]:
        fields = [v for pair in _fields(record).items() for v in pair]
        return ("XADD", _key(record.workspace), "MAXLEN", "~", self._maxlen, "*", *fields)

    async def tail(self, workspace: str, count: int) -> list[AuditRecord]:
        """The newest ``count`` records, newest first."""
        return [record for _id, record in await self.newest(workspace, count)]

    async def newest(self, workspace: str, count: int) -> list[tuple[str, AuditRecord]]:
        """The newest ``count`` records with their stream ids, newest first."""
        async with self._redis.operation():
            entries = await self._client.xrevrange(_key(workspace), count=count)
        return [(i.decode(), _record(workspace, fields)) for i, fields in entries]

    async def after(
        self, workspace: str, last_id: str, *, block_ms: int
    ) -> list[tuple[str, AuditRecord]]:
        """Records added after ``last_id`` (``$``: from now), oldest first, waiting up to
        ``block_ms`` for the first."""
        async with self._redis.operation():
            replies = await self._client.xread({_key(workspace): last_id}, block=block_ms)
        return [
            (i.decode(), _record(workspace, fields))
            for _stream, entries in replies or []
            for i, fields in entries
        ]


def _record(workspace: str, fields: dict[bytes, bytes]) -> AuditRecord:
    f = {k.decode(): v for k, v in fields.items()}
    return AuditRecord(
        at=float(f["at"]),
        workspace=workspace,
        subject=f["sub"].decode(),
        tool=f["tool"].decode(),
        addresses=tuple(orjson.loads(f["addresses"])),
        outcome=f["outcome"].decode(),
        duration_ms=float(f["ms"]),
        request_id=f["rid"].decode(),
    )
