"""A per-subject call budget per minute in each workspace, shared by every gateway through Redis.

The count lives in the workspace's hash slot, keyed by workspace and subject: an agent of one
workspace never spends the budget of another workspace's agent of the same name.
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

from . import _keys as keys
from ._redis_errors import mapped_redis_errors

# A window's counter outlives its minute so that a late call still finds it; it then goes.
WINDOW_TTL_SECONDS = 120


class RedisRateLimiter:
    """Fixed one-minute windows: one INCR and one EXPIRE per call."""

    def __init__(self, *, client: aioredis.Redis[bytes], per_minute: int) -> None:
        self._client = client
        self._per_minute = per_minute

    @property
    def enabled(self) -> bool:
        return self._per_minute > 0

    @property
    def per_minute(self) -> int:
        return self._per_minute

    def window_key(self, workspace: str, subject: str, now: float) -> str:
        return keys.rate_window(workspace, subject, int(now // 60))

    def retry_after(self, count: Any, now: float) -> float | None:
        """None if a window holding ``count`` calls allows this one, else seconds to wait."""
        if int(count) > self._per_minute:
            return round((int(now // 60) + 1) * 60 - now, 1)
        return None

    async def hit(self, workspace: str, subject: str) -> float | None:
        """Count one call; None if allowed, else the seconds until the window resets."""
        if not self.enabled:
            return None
        now = time.time()
        key = self.window_key(workspace, subject, now)
        async with mapped_redis_errors():
            pipe = self._client.pipeline(transaction=False)
            pipe.incr(key)
            pipe.expire(key, WINDOW_TTL_SECONDS)
            count, _ = await pipe.execute()
        return self.retry_after(count, now)
