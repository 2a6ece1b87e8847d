"""Revoked token ids and subjects, in Redis so that every gateway sees a revocation at once.

No local cache: a revocation must take effect on the very next call of every gateway. The
check is queued on a pipeline (see ``_admission``) so it shares a round trip with the rate
limit.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import redis.asyncio as aioredis

from ._redis_errors import mapped_redis_errors

_TOKENS = "bbrv:tokens:"
_SUBJECTS = "bbrv:subjects:"
# A revoked subject's marker outlives any token issued before it (a year is the longest ttl).
SUBJECT_MARK_SECONDS = 366 * 86400


class TokenIdentity(Protocol):
    """What revocation needs of a verified token."""

    @property
    def token_id(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def issued_at(self) -> float: ...


def revocation_keys(token: TokenIdentity) -> tuple[str, str]:
    """The two keys whose values tell whether ``token`` is revoked, read with one MGET.

    One command rather than two in a pipeline: this read is paid by every tool call.
    """
    return _TOKENS + token.token_id, _SUBJECTS + token.subject


def revoked_from_values(token: TokenIdentity, values: Any) -> bool:
    """Whether the MGET of ``revocation_keys(token)`` says the token is revoked."""
    token_mark, subject_at = values
    if token_mark is not None:
        return True
    return subject_at is not None and float(subject_at) >= float(token.issued_at)


class RedisRevocationList:
    def __init__(self, *, client: aioredis.Redis[bytes]) -> None:
        self._client = client

    async def is_revoked(self, grant: TokenIdentity) -> bool:
        async with mapped_redis_errors():
            values = await self._client.mget(revocation_keys(grant))
        return revoked_from_values(grant, values)

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
