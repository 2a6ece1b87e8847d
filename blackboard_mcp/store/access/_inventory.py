"""The records of issued tokens, in Redis: one hash of records per workspace, an index by
expiry that drops them, and when each token was last admitted.

All three keys are in the workspace's hash slot, beside its revocation marks, so the per-call
check (``_admission``) reads a token's record and writes its last use in the same script
that counts the call. A record is about 300 bytes of JSON (more with many topics), plus its
entry in the expiry index and, once used, in the last-use hash: under 0.6 KB a token in all.
Records are kept until an hour after their token expires, so a listing shows what expired
lately, then dropped by the next record or listing of the workspace.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson

from ..connection import _key_names as keys
from ..connection._board_client import RedisCommands

# How long a record outlives its token: a listing shows lately expired tokens as such.
KEPT_AFTER_EXPIRY_SECONDS = 3600

# Records of tokens expired for longer than ``ARGV[1]`` seconds before now (``ARGV[2]``) go,
# with their last use; at most 1,000 a call, so a call never takes long.
_PRUNE = """
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2] - ARGV[1], 'LIMIT', 0, 1000)
if #gone > 0 then
  redis.call('HDEL', KEYS[2], unpack(gone))
  redis.call('HDEL', KEYS[3], unpack(gone))
  redis.call('ZREM', KEYS[1], unpack(gone))
end
return #gone
"""


class RedisTokenInventory:
    """``auth.TokenInventory`` on Redis. Records are auth's JSON; the store only keeps them."""

    def __init__(self, *, client: RedisCommands, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._clock = clock

    async def record_json(
        self, workspace: str, token_id: str, expires_at: float, record: dict[str, object]
    ) -> None:
        async with self._client.operation():
            pipe = self._client.redis.pipeline(transaction=True)
            pipe.hset(keys.issued_tokens(workspace), token_id, orjson.dumps(record))
            pipe.zadd(keys.issued_expiry(workspace), {token_id: expires_at})
            await pipe.execute()
            await self._prune(workspace)

    async def find_json(self, workspace: str, token_id: str) -> dict[str, object] | None:
        async with self._client.operation():
            raw = await self._client.redis.hget(keys.issued_tokens(workspace), token_id)
        return _decoded(raw)

    async def all_json(self, workspace: str) -> list[tuple[dict[str, object], float | None, bool]]:
        """Every kept record with its last use and whether its token (or an ancestor) is
        marked revoked, oldest first."""
        async with self._client.operation():
            await self._prune(workspace)
            records, used = await self._pipeline_get(workspace)
            decoded = [r for r in (_decoded(v) for v in records.values()) if r is not None]
            marks: list[bool] = []
            if decoded:
                pipe = self._client.redis.pipeline(transaction=False)
                for record in decoded:
                    chain = [str(record.get("id")), *_strings(record.get("ancestors"))]
                    pipe.exists(*(keys.revoked_token(workspace, t) for t in chain))
                marks = [bool(n) for n in await pipe.execute()]
        out = []
        for record, revoked in zip(decoded, marks, strict=True):
            last = used.get(str(record.get("id")).encode())
            out.append((record, float(last) if last is not None else None, revoked))
        out.sort(key=lambda entry: float(str(entry[0].get("iat", 0))))
        return out

    async def _pipeline_get(self, workspace: str) -> tuple[dict[bytes, bytes], dict[bytes, bytes]]:
        pipe = self._client.redis.pipeline(transaction=False)
        pipe.hgetall(keys.issued_tokens(workspace))
        pipe.hgetall(keys.token_last_used(workspace))
        records, used = await pipe.execute()
        return records, used

    async def _prune(self, workspace: str) -> None:
        await self._client.redis.eval(  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            _PRUNE,
            3,
            keys.issued_expiry(workspace),
            keys.issued_tokens(workspace),
            keys.token_last_used(workspace),
            KEPT_AFTER_EXPIRY_SECONDS,
            int(self._clock()),
        )


def _decoded(raw: bytes | None) -> dict[str, object] | None:
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []
