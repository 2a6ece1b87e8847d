"""Revoked token ids and subjects, in Redis so that every gateway sees a revocation at once.

No local cache: each call costs one round trip (two EXISTS-like reads, pipelined).
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

from ._redis_errors import mapped_redis_errors

_TOKENS = "bbrv:tokens:"
_SUBJECTS = "bbrv:subjects:"
# A revoked subject's marker outlives any token issued before it (a year is the longest ttl).
SUBJECT_MARK_SECONDS = 366 * 86400


class RedisRevocationList:
    def __init__(self, *, client: aioredis.Redis[bytes]) -> None:
        self._client = client

    async def is_revoked(self, grant: Any) -> bool:
        async with mapped_redis_errors():
            pipe = self._client.pipeline(transaction=False)
            pipe.exists(_TOKENS + grant.token_id)
            pipe.get(_SUBJECTS + grant.subject)
            token_revoked, subject_at = await pipe.execute()
        if token_revoked:
            return True
        return subject_at is not None and float(subject_at) >= float(grant.issued_at)

    async def revoke_token(self, token_id: str, expires_at: float | None) -> None:
        # The entry can go when the token would have expired anyway.
        ttl = int(expires_at - time.time()) + 60 if expires_at else SUBJECT_MARK_SECONDS
        async with mapped_redis_errors():
            await self._client.set(_TOKENS + token_id, "1", ex=max(ttl, 60))

    async def revoke_subject(self, subject: str) -> None:
        # Tokens issued in this same second count as revoked too (iat has 1 s resolution).
        async with mapped_redis_errors():
            await self._client.set(
                _SUBJECTS + subject, str(int(time.time())), ex=SUBJECT_MARK_SECONDS
            )
