"""The per-workspace audit stream (capped), written by the gateway for every call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import redis.asyncio as aioredis

from blackboard_mcp.auth import AuditRecord

from ._redis_errors import mapped_redis_errors


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
    def __init__(self, *, client: aioredis.Redis[bytes], maxlen: int) -> None:
        self._client = client
        self._maxlen = maxlen

    async def record(self, record: AuditRecord) -> None:
        await self.record_many([record])

    async def record_many(self, records: Sequence[AuditRecord]) -> None:
        if not records:
            return
        async with mapped_redis_errors():
            pipe = self._client.pipeline(transaction=False)
            for record in records:
                pipe.xadd(
                    _key(record.workspace),
                    _fields(record),
                    maxlen=self._maxlen,
                    approximate=True,
                )
            await pipe.execute()

    async def tail(self, workspace: str, count: int) -> list[AuditRecord]:
        """The newest ``count`` records, newest first."""
        async with mapped_redis_errors():
            entries = await self._client.xrevrange(_key(workspace), count=count)
        out = []
        for _id, fields in entries:
            f = {k.decode(): v for k, v in fields.items()}
            out.append(
                AuditRecord(
                    at=float(f["at"]),
                    workspace=workspace,
                    subject=f["sub"].decode(),
                    tool=f["tool"].decode(),
                    addresses=tuple(orjson.loads(f["addresses"])),
                    outcome=f["outcome"].decode(),
                    duration_ms=float(f["ms"]),
                    request_id=f["rid"].decode(),
                )
            )
        return out
