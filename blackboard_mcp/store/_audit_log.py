"""The per-workspace audit stream (capped), written by the gateway for every call."""

from __future__ import annotations

import orjson
import redis.asyncio as aioredis

from blackboard_mcp.auth import AuditRecord

from ._redis_errors import mapped_redis_errors


def _key(workspace: str) -> str:
    return f"bbau:{{{workspace}}}"


class RedisAuditLog:
    def __init__(self, *, client: aioredis.Redis[bytes], maxlen: int) -> None:
        self._client = client
        self._maxlen = maxlen

    async def record(self, record: AuditRecord) -> None:
        async with mapped_redis_errors():
            await self._client.xadd(
                _key(record.workspace),
                {
                    "at": record.at,
                    "sub": record.subject,
                    "tool": record.tool,
                    "addresses": orjson.dumps(list(record.addresses)),
                    "outcome": record.outcome,
                    "ms": record.duration_ms,
                    "rid": record.request_id,
                },
                maxlen=self._maxlen,
                approximate=True,
            )

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
