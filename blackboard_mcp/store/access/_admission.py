"""The per-call checks that need Redis, revocation and the rate limit, in one command.

Every tool call pays for these before its handler runs. One Lua script does both, in this
order: a revoked token is refused without being counted, so a stolen token that was revoked
cannot spend the budget of the token that replaced it. Its three keys (the token's mark, the
subject's mark, the subject's window) are all in the workspace's hash slot, so the script
runs on one Redis Cluster node like every other command of a workspace.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..connection import _key_names as keys
from ..connection._placement import Placement
from ..connection._tx import Gate
from ._ratelimit import COUNT_LUA, WINDOW_SECONDS, RedisRateLimiter
from ._revocations import TokenIdentity, revocation_keys

# KEYS: as REVOKED_LUA (token mark, subject mark, token records, ancestors' marks), then the
# rate window and the last-use hash last. ARGV: the token's id and iat (REVOKED_LUA's), the
# limit (0: none), the window in ms, now in unix seconds. Returns -1 for a revoked token, 0
# for an admitted call, else the milliseconds until the subject's window closes (the rate
# limiter's count, store/access/_ratelimit.py). A recorded token's last use is written at
# most once a minute.
_ADMIT = (
    """
local window_key, last_used = KEYS[#KEYS - 1], KEYS[#KEYS]
local chain = {}
for i = 1, #KEYS - 2 do chain[i] = KEYS[i] end
for i = 4, #chain do
  if redis.call('EXISTS', chain[i]) == 1 then return -1 end
end
if redis.call('EXISTS', chain[1]) == 1 then return -1 end
if redis.call('HEXISTS', chain[3], ARGV[1]) == 1 then
  local last = redis.call('HGET', last_used, ARGV[1])
  if not last or tonumber(ARGV[5]) - tonumber(last) >= 60 then
    redis.call('HSET', last_used, ARGV[1], ARGV[5])
  end
else
  local revoked_at = redis.call('GET', chain[2])
  if revoked_at and tonumber(revoked_at) >= tonumber(ARGV[2]) then return -1 end
end
if ARGV[3] == '0' then return 0 end
local limit, window_ms = ARGV[3], ARGV[4]"""
    + COUNT_LUA
)


@dataclass(frozen=True)
class Admission:
    """The verdict on one call: a revoked token, or seconds to wait when over the limit."""

    revoked: bool
    retry_after: float | None


class RedisCallAdmission:
    def __init__(
        self,
        *,
        redis: Placement,
        limiter: RedisRateLimiter,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._limiter = limiter
        self._clock = clock
        # As EVAL, like ``gate``: a Redis caches an EVAL'd script by itself, and on a single
        # Redis it goes on one of the store's own connections (through redis-py's command
        # path it cost list_keys and search_keys more CPU than their answer's JSON).
        self._redis = redis

    async def admit(self, token: TokenIdentity) -> Admission:
        """Check revocation, then count the call against its subject's budget."""
        keys, args = self._arguments(token)
        async with self._redis.operation():
            (reply,) = await self._redis.send([("EVAL", _ADMIT, len(keys), *keys, *args)])
        return self._verdict(int(reply))

    def gate(self, token: TokenIdentity, on_verdict: Callable[[Admission], None]) -> Gate:
        """The same check as ``admit``, sent with a write's first round trip
        (store/connection/_tx.py).

        ``on_verdict`` gets the Admission and raises to refuse the call; the write then
        neither writes nor answers anything it read. The script goes by hash; a Redis that
        lacks it runs nothing of it, and it is loaded and sent again in one more round trip
        (store/connection/_scripts.py), so it counts the call once either way.
        """
        keys, args = self._arguments(token)
        return Gate(
            command=("EVAL", _ADMIT, len(keys), *keys, *args),
            judge=lambda reply: on_verdict(self._verdict(int(reply))),
        )

    def _arguments(self, token: TokenIdentity) -> tuple[list[str], list[str | int]]:
        window = self._limiter.window_key(token.workspace, token.subject)
        limit = self._limiter.per_minute if self._limiter.enabled else 0
        found = [*revocation_keys(token), window, keys.token_last_used(token.workspace)]
        return found, [
            token.token_id,
            int(token.issued_at),
            limit,
            WINDOW_SECONDS * 1000,
            int(self._clock()),
        ]

    def _verdict(self, reply: int) -> Admission:
        if reply < 0:
            return Admission(revoked=True, retry_after=None)
        return Admission(revoked=False, retry_after=self._limiter.retry_after(reply))
