"""Revoked token ids and subjects, in Redis so that every gateway sees a revocation at once.

Marks are per workspace and live in the workspace's hash slot, like every other key of it:
the per-call check (see ``_admission``) reads them in the same script that counts the call,
one command on one slot. No local cache: a revocation must take effect on the very next
call of every gateway. How long a mark lasts is the caller's (auth's) decision.
"""

from __future__ import annotations

import math
import time
from typing import Any, Protocol

import redis.asyncio as aioredis

from ..connection import _keys as keys
from ..connection._redis_errors import mapped_redis_errors


class TokenIdentity(Protocol):
    """What revocation needs of a verified token."""

    @property
    def token_id(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def workspace(self) -> str: ...
    @property
    def issued_at(self) -> float: ...


def revocation_keys(token: TokenIdentity) -> tuple[str, str]:
    """The token's mark and its subject's mark, both in the token's workspace slot."""
    return (
        keys.revoked_token(token.workspace, token.token_id),
        keys.revoked_subject(token.workspace, token.subject),
    )


def revoked_from_values(token: TokenIdentity, values: Any) -> bool:
    """Whether the MGET of ``revocation_keys(token)`` says the token is revoked."""
    token_mark, subject_at = values
    if token_mark is not None:
        return True
    return subject_at is not None and float(subject_at) >= float(token.issued_at)


def _seconds_until(until: float) -> int:
    # At least a minute, so that a mark asked for "now" still outlives the call racing it.
    return max(math.ceil(until - time.time()), 60)


class RedisRevocationList:
    def __init__(self, *, client: aioredis.Redis[bytes]) -> None:
        self._client = client

    async def is_revoked(self, grant: TokenIdentity) -> bool:
        async with mapped_redis_errors():
            values = await self._client.mget(revocation_keys(grant))
        return revoked_from_values(grant, values)

    async def revoke_token(self, workspace: str, token_id: str, *, until: float) -> None:
        key = keys.revoked_token(workspace, token_id)
        async with mapped_redis_errors():
            # GT: a second revocation of the same token may lengthen its mark, never shorten it.
            pipe = self._client.pipeline(transaction=True)
            pipe.set(key, "1", nx=True, ex=_seconds_until(until))
            pipe.expire(key, _seconds_until(until), gt=True)
            await pipe.execute()

    async def revoke_subject(
        self, workspace: str, subject: str, *, issued_before: float, until: float
    ) -> None:
        # Tokens issued in this same second count as revoked too (iat has 1 s resolution).
        # A later revocation moves the mark forward, which still covers every earlier token.
        async with mapped_redis_errors():
            await self._client.set(
                keys.revoked_subject(workspace, subject),
                str(math.floor(issued_before)),
                ex=_seconds_until(until),
            )
