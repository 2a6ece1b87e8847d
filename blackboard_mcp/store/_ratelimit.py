"""A per-subject call budget per minute, shared by every gateway process through Redis."""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from ._redis_errors import mapped_redis_errors


class RedisRateLimiter:
    """Fixed one-minute windows: one INCR and one EXPIRE in a single round trip."""

    def __init__(self, *, client: aioredis.Redis[bytes], per_minute: int) -> None:
        self._client = client
        self._per_minute = per_minute

    async def hit(self, subject: str) -> float | None:
        """Count one call; None if allowed, else the seconds until the window resets."""
        if self._per_minute <= 0:
            return None
        now = time.time()
        window = int(now // 60)
        key = f"bbrl:{{{subject}}}:{window}"
        async with mapped_redis_errors():
            pipe = self._client.pipeline(transaction=False)
            pipe.incr(key)
            pipe.expire(key, 120)
            count, _ = await pipe.execute()
        if int(count) > self._per_minute:
            return round((window + 1) * 60 - now, 1)
        return None
