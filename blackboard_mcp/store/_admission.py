"""The per-call checks that need Redis, revocation and the rate limit, in one round trip.

Every tool call pays for these before its handler runs; as two separate pipelines they
were two of the gateway's largest costs per call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis.asyncio as aioredis

from ._ratelimit import RedisRateLimiter
from ._redis_errors import mapped_redis_errors
from ._revocations import TokenIdentity, revocation_keys, revoked_from_values


@dataclass(frozen=True)
class Admission:
    """The verdict on one call: a revoked token, or seconds to wait when over the limit."""

    revoked: bool
    retry_after: float | None


class RedisCallAdmission:
    def __init__(self, *, client: aioredis.Redis[bytes], limiter: RedisRateLimiter) -> None:
        self._client = client
        self._limiter = limiter

    async def admit(self, token: TokenIdentity) -> Admission:
        """Check revocation and count the call against its subject's budget.

        A call of a revoked token still counts against the budget: that costs the caller
        nothing it could use, and it keeps this one round trip.
        """
        now = time.time()
        async with mapped_redis_errors():
            if not self._limiter.enabled:
                values = await self._client.mget(revocation_keys(token))
                return Admission(revoked=revoked_from_values(token, values), retry_after=None)
            pipe = self._client.pipeline(transaction=False)
            pipe.mget(revocation_keys(token))
            self._limiter.queue_hit(pipe, token.subject, now)
            values, count, _ = await pipe.execute()
        return Admission(
            revoked=revoked_from_values(token, values),
            retry_after=self._limiter.retry_after(count, now),
        )
