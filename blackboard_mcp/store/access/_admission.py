"""The per-call checks that need Redis, revocation and the rate limit, in one command.

Every tool call pays for these before its handler runs. One Lua script does both, in this
order: a revoked token is refused without being counted, so a stolen token that was revoked
cannot spend the budget of the token that replaced it. Its three keys (the token's mark, the
subject's mark, the subject's window) are all in the workspace's hash slot, so the script
runs on one Redis Cluster node like every other command of a workspace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..connection._placement import Placement
from ..connection._redis_errors import mapped_redis_errors
from ..connection._tx import Gate
from ._ratelimit import COUNT_LUA, WINDOW_SECONDS, RedisRateLimiter
from ._revocations import TokenIdentity, revocation_keys

# KEYS: token mark, subject mark, rate window. ARGV: the token's iat, the limit (0: none),
# the window in ms. Returns -1 for a revoked token, 0 for an admitted call, else the
# milliseconds until the subject's window closes (the rate limiter's count,
# store/access/_ratelimit.py).
_ADMIT = (
    """
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
local revoked_at = redis.call('GET', KEYS[2])
if revoked_at and tonumber(revoked_at) >= tonumber(ARGV[1]) then return -1 end
if ARGV[2] == '0' then return 0 end
local window_key, limit, window_ms = KEYS[3], ARGV[2], ARGV[3]"""
    + COUNT_LUA
)


@dataclass(frozen=True)
class Admission:
    """The verdict on one call: a revoked token, or seconds to wait when over the limit."""

    revoked: bool
    retry_after: float | None


class RedisCallAdmission:
    def __init__(self, *, redis: Placement, limiter: RedisRateLimiter) -> None:
        self._limiter = limiter
        # As EVAL, like ``gate``: a Redis caches an EVAL'd script by itself, and on a single
        # Redis it goes on one of the store's own connections (through redis-py's command
        # path it cost list_keys and search_keys more CPU than their answer's JSON).
        self._redis = redis

    async def admit(self, token: TokenIdentity) -> Admission:
        """Check revocation, then count the call against its subject's budget."""
        keys, args = self._arguments(token)
        async with mapped_redis_errors():
            (reply,) = await self._redis.send([("EVAL", _ADMIT, len(keys), *keys, *args)])
        return self._verdict(int(reply))

    def gate(self, token: TokenIdentity, on_verdict: Callable[[Admission], None]) -> Gate:
        """The same check as ``admit``, sent with a write's first round trip
        (store/connection/_tx.py).

        ``on_verdict`` gets the Admission and raises to refuse the call; the write then
        neither writes nor answers anything it read. The script goes as EVAL, not EVALSHA: a
        Redis that lost its script cache (a restart, a failover) would answer NOSCRIPT in the
        middle of the write's first round trip, and Redis caches an EVAL'd script by itself.
        """
        keys, args = self._arguments(token)
        return Gate(
            command=("EVAL", _ADMIT, len(keys), *keys, *args),
            judge=lambda reply: on_verdict(self._verdict(int(reply))),
        )

    def _arguments(self, token: TokenIdentity) -> tuple[list[str], list[int]]:
        token_key, subject_key = revocation_keys(token)
        window = self._limiter.window_key(token.workspace, token.subject)
        limit = self._limiter.per_minute if self._limiter.enabled else 0
        return [token_key, subject_key, window], [
            int(token.issued_at),
            limit,
            WINDOW_SECONDS * 1000,
        ]

    def _verdict(self, reply: int) -> Admission:
        if reply < 0:
            return Admission(revoked=True, retry_after=None)
        return Admission(revoked=False, retry_after=self._limiter.retry_after(reply))
