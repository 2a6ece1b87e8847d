"""Revoked token ids and subjects, in Redis so that every gateway sees a revocation at once.

Marks are per workspace and live in the workspace's hash slot, like every other key of it:
the per-call check (see ``_admission``) reads them in the same script that counts the call,
one command on one slot. No local cache: a revocation must take effect on the very next
call of every gateway. How long a mark lasts is the caller's (auth's) decision.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
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


# Which of some tokens of one workspace are revoked. KEYS: the workspace's token records,
# then per token its mark, its subject's mark and its ancestors' marks (a delegated token's
# chain). ARGV: per token its id, its iat and how many ancestors it has. Returns the ids of
# the revoked ones. A mark on the token or on any ancestor revokes it. The subject's mark (a
# time) revokes the tokens issued up to then that are not on record; a token on record is
# revoked by its own mark, which revoking its subject sets, so one issued after the
# revocation is valid whatever the second. (The admission script, store/access/_admission.py,
# applies the same rule to one token; a test holds the two to the same answers.)
REVOKED_AMONG_LUA = """
local records, revoked, k = KEYS[1], {}, 2
for a = 1, #ARGV, 3 do
  local id, iat, chain = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local hit = redis.call('EXISTS', KEYS[k]) == 1
  for i = k + 2, k + 1 + chain do
    if not hit and redis.call('EXISTS', KEYS[i]) == 1 then hit = true end
  end
  if not hit and redis.call('HEXISTS', records, id) == 0 then
    local revoked_at = redis.call('GET', KEYS[k + 1])
    hit = revoked_at ~= false and tonumber(revoked_at) >= iat
  end
  if hit then revoked[#revoked + 1] = id end
  k = k + 2 + chain
end
return revoked
"""

# Tokens asked about in one script at most: a script blocks Redis while it runs.
_TOKENS_PER_SCRIPT = 200


def revocation_keys(token: TokenIdentity) -> list[str]:
    """The keys the admission script reads of ``token``, all in its workspace's slot."""
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
        return grant.token_id in await self.revoked_among([grant])

    async def revoked_among(self, grants: Sequence[TokenIdentity]) -> set[str]:
        """The token ids of ``grants`` that are revoked: one script for up to 200 tokens of
        a workspace (each workspace's keys share its slot)."""
        revoked: set[str] = set()
        by_workspace: dict[str, list[TokenIdentity]] = {}
        for grant in grants:
            by_workspace.setdefault(grant.workspace, []).append(grant)
        for workspace, held in by_workspace.items():
            for start in range(0, len(held), _TOKENS_PER_SCRIPT):
                chunk = held[start : start + _TOKENS_PER_SCRIPT]
                found = [keys.issued_tokens(workspace)]
                arguments: list[str | int] = []
                for grant in chunk:
                    found += [
                        keys.revoked_token(workspace, grant.token_id),
                        keys.revoked_subject(workspace, grant.subject),
                        *(keys.revoked_token(workspace, a) for a in grant.ancestors),
                    ]
                    arguments += [grant.token_id, int(grant.issued_at), len(grant.ancestors)]
                async with self._client.operation():
                    reply = await self._client.redis.eval(  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
                        REVOKED_AMONG_LUA, len(found), *found, *arguments
                    )
                revoked.update(_text(item) for item in reply)
        return revoked

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


def _text(item: bytes | str) -> str:
    return item.decode() if isinstance(item, bytes) else item
