"""A per-subject call budget per minute in each workspace, shared by every gateway through Redis.

The count lives in the workspace's hash slot, keyed by workspace and subject: an agent of one
workspace never spends the budget of another workspace's agent of the same name.

A subject's window opens with its first counted call and lasts WINDOW_SECONDS, timed by
Redis (the key's expiry), not by any gateway's clock: gateways whose clocks disagree count
the same window, no minute boundary lets a burst of twice the limit through, and the wait a
refused call is told is the window's remaining time to the millisecond.
"""

from __future__ import annotations

from ..connection import _key_names as keys
from ..connection._board_client import RedisCommands

WINDOW_SECONDS = 60

# Counts one call in the window ``window_key`` (Lua locals ``window_key``, ``limit``,
# ``window_ms``, set by the script that includes it). Returns 0 when the call is allowed,
# else the milliseconds until the window closes (at least 1).
COUNT_LUA = """
local count = redis.call('INCR', window_key)
local left = redis.call('PTTL', window_key)
if count == 1 or left < 0 then
  redis.call('PEXPIRE', window_key, window_ms)
  left = tonumber(window_ms)
end
if count <= tonumber(limit) then return 0 end
if left < 1 then return 1 end
return left
"""
# KEYS: the subject's window. ARGV: the limit, the window in ms.
_COUNT = "local window_key, limit, window_ms = KEYS[1], ARGV[1], ARGV[2]" + COUNT_LUA


class RedisRateLimiter:
    """At most ``per_minute`` calls per subject in a window of WINDOW_SECONDS."""

    def __init__(self, *, client: RedisCommands, per_minute: int) -> None:
        self._client = client
        self._per_minute = per_minute
        self._count = client.redis.register_script(_COUNT)

    @property
    def enabled(self) -> bool:
        return self._per_minute > 0

    @property
    def per_minute(self) -> int:
        return self._per_minute

    def window_key(self, workspace: str, subject: str) -> str:
        return keys.rate_window(workspace, subject)

    @staticmethod
    def retry_after(wait_ms: int) -> float | None:
        """None for a reply of the count (0: allowed), else seconds to wait, rounded up to
        a tenth so that a client waiting that long finds the window closed."""
        if wait_ms <= 0:
            return None
        return -(-wait_ms // 100) / 10

    async def hit(self, workspace: str, subject: str) -> float | None:
        """Count one call; None if allowed, else the seconds until the window closes."""
        if not self.enabled:
            return None
        key = self.window_key(workspace, subject)
        async with self._client.operation():
            reply = await self._count(keys=[key], args=[self._per_minute, WINDOW_SECONDS * 1000])
        return self.retry_after(int(reply))
