"""Revoked token ids and subjects, in Redis so that every gateway sees a revocation at once.

Marks are per workspace and live in the workspace's hash slot, like every other key of it:
the per-call check (see ``_admission``) reads them in the same script that counts the call,
one command on one slot. No local cache: a revocation must take effect on the very next
call of every gateway. How long a mark lasts is the caller's (auth's) decision.
"""

from __future__ import annotations

import math
import time
from typing import Protocol

from ..connection import _key_names as keys
from ..connection._board_client import RedisCommands


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
    @property
    def ancestors(self) -> tuple[str, ...]: ...


# Whether a token is revoked. KEYS: the token's mark, its subject's mark, the workspace's
# token records, then its ancestors' marks (a delegated token's chain). ARGV: its id, its
# iat. A mark on the token or on any ancestor revokes it. The subject's mark (a time) revokes
# the tokens issued up to then that are not on record; a token on record is revoked by its own
# mark, which revoking its subject sets, so one issued after the revocation is valid whatever
# the second.
REVOKED_LUA = """
for i = 4, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return -1 end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
local recorded = redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1
if not recorded then
  local revoked_at = redis.call('GET', KEYS[2])
  if revoked_at and tonumber(revoked_at) >= tonumber(ARGV[2]) then return -1 end
end
"""


def revocation_keys(token: TokenIdentity) -> list[str]:
    """The keys ``REVOKED_LUA`` reads, all in the token's workspace slot."""
    return [
        keys.revoked_token(token.workspace, token.token_id),
        keys.revoked_subject(token.workspace, token.subject),
        keys.issued_tokens(token.workspace),
        *(keys.revoked_token(token.workspace, a) for a in token.ancestors),
    ]


def _seconds_until(until: float) -> int:
    # At least a minute, so that a mark asked for "now" still outlives the call racing it.
    return max(math.ceil(until - time.time()), 60)


class RedisRevocationList:
    def __init__(self, *, client: RedisCommands) -> None:
        self._client = client

    async def is_revoked(self, grant: TokenIdentity) -> bool:
        found = revocation_keys(grant)
        script = REVOKED_LUA + "\nreturn 0"
        async with self._client.operation():
            reply = await self._client.redis.eval(  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
                script, len(found), *found, grant.token_id, int(grant.issued_at)
            )
        return int(reply) < 0

    async def revoke_token(self, workspace: str, token_id: str, *, until: float) -> None:
        key = keys.revoked_token(workspace, token_id)
        async with self._client.operation():
            # GT: a second revocation of the same token may lengthen its mark, never shorten it.
            pipe = self._client.redis.pipeline(transaction=True)
            pipe.set(key, "1", nx=True, ex=_seconds_until(until))
            pipe.expire(key, _seconds_until(until), gt=True)
            await pipe.execute()

    async def revoke_subject(
        self, workspace: str, subject: str, *, issued_before: float, until: float
    ) -> None:
        # Tokens issued in this same second count as revoked too (iat has 1 s resolution).
        # A later revocation moves the mark forward, which still covers every earlier token.
        async with self._client.operation():
            await self._client.redis.set(
                keys.revoked_subject(workspace, subject),
                str(math.floor(issued_before)),
                ex=_seconds_until(until),
            )
