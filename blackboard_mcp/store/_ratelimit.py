"""A per-subject call budget per minute, shared by every gateway process through Redis."""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

from ._redis_errors import mapped_redis_errors


class RedisRateLimiter:
    """Fixed one-minute windows: one INCR and one EXPIRE in a single round trip."""

    def __init__(self, *, client: aioredis.Redis[bytes], per_minute: int) -> None:
        self._client = client
        self._per_minute = per_minute

    @property
    def enabled(self) -> bool:
        return self._per_minute > 0

    def queue_hit(self, pipe: Any, subject: str, now: float) -> None:
        """Queue the count of one call (two replies; the first is the window's count)."""
        key = f"bbrl:{{{subject}}}:{int(now // 60)}"
        pipe.incr(key)
        pipe.expire(key, 120)

    def retry_after(self, count: Any, now: float) -> float | None:
        """None if a window holding ``count`` calls allows this one, else seconds to wait."""
        if int(count) > self._per_minute:
            return round((int(now // 60) + 1) * 60 - now, 1)
        return None

    async def hit(self, subject: str) -> float | None:
        """Count one call; None if allowed, else the seconds until the window resets."""
        if not self.enabled:
            return None
        now = time.time()
        async with mapped_redis_errors():
            pipe = self._client.pipeline(transaction=False)
            self.queue_hit(pipe, subject, now)
            count, _ = await pipe.execute()
        return self.retry_after(count, now)
