"""Revocations: the storage Protocol (Redis implements it, in the store) and the policy.

A revocation belongs to one workspace: a token id or a subject is revoked among that
workspace's tokens only, so an admin of one workspace cannot lock out another's agent of the
same name. How long a mark is kept is decided here, never by whoever asks for it: until the
token's own expiry when the token is presented, else for the longest lifetime a token may
have (``BB_MAX_TOKEN_TTL``, enforced at issue and at verification), which outlives any token
the mark could concern.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from ._errors import BadTokenRequest, NotIssued, WrongWorkspace
from ._grants import Grant
from ._inventory import TokenInventory
from ._names import is_subject, is_token_id


class RevocationList(Protocol):
    async def is_revoked(self, grant: Grant) -> bool:
        """Whether the token id or the subject of ``grant`` is revoked in its workspace."""
        ...

    async def revoked_among(self, grants: Sequence[Grant]) -> set[str]:
        """The token ids of ``grants`` that ``is_revoked`` would say are revoked, asked of
        many tokens at once (the open listeners of a process)."""
        ...

    async def revoke_token(self, workspace: str, token_id: str, *, until: float) -> None:
        """Refuse the token ``token_id`` of ``workspace`` until the unix time ``until``."""
        ...

    async def revoke_subject(
        self, workspace: str, subject: str, *, issued_before: float, until: float
    ) -> None:
        """Refuse every token of ``subject`` in ``workspace`` issued at or before
        ``issued_before``, until the unix time ``until``."""
        ...


class NoRevocations:
    """For checks that must not do I/O (the HTTP edge); revocation is checked per call."""

    async def is_revoked(self, grant: Grant) -> bool:
        return False

    async def revoked_among(self, grants: Sequence[Grant]) -> set[str]:
        return set()

    async def revoke_token(self, workspace: str, token_id: str, *, until: float) -> None:
        raise NotImplementedError("NoRevocations cannot revoke")

    async def revoke_subject(
        self, workspace: str, subject: str, *, issued_before: float, until: float
    ) -> None:
        raise NotImplementedError("NoRevocations cannot revoke")


class Revoker:
    """Revokes within one workspace, for as long as the revoked tokens could be accepted.

    A revocation names a token the board issued (the inventory has its record) or a subject it
    issued tokens to; anything else is ``NotIssued`` (a typo), unless forced. Revoking a
    subject marks each of its recorded tokens by id, and marks the subject for tokens not on
    record (issued with the key elsewhere, or before tokens were recorded): a token on record
    issued after the revocation is valid, whatever the second.
    """

    def __init__(
        self,
        *,
        revocations: RevocationList,
        inventory: TokenInventory,
        max_ttl_seconds: int,
        leeway: int,
    ) -> None:
        self._revocations = revocations
        self._inventory = inventory
        self._max_ttl = max_ttl_seconds
        # A token is accepted up to ``leeway`` past its exp, and its iat may be up to
        # ``leeway`` ahead of this clock; a minute more covers a mark's own rounding.
        self._slack = 2 * leeway + 60

    async def revoke_presented(self, token: Grant, *, workspace: str) -> str:
        """Revoke a verified token of ``workspace`` until its own expiry; returns the target."""
        if token.workspace != workspace:
            raise WrongWorkspace(f"that token is not one of workspace {workspace!r}")
        await self._revocations.revoke_token(
            workspace, token.token_id, until=token.expires_at + self._slack
        )
        return f"id:{token.token_id}"

    async def revoke_token_id(self, workspace: str, token_id: str, *, force: bool = False) -> str:
        """Revoke by id: until its recorded expiry, or (forced, not on record) for the
        longest lifetime a token has."""
        if not is_token_id(token_id):
            raise BadTokenRequest(f"token id {token_id!r} is not 1-128 printable characters")
        record = await self._inventory.find(workspace, token_id)
        if record is None and not force:
            raise NotIssued(
                f"no token with id {token_id!r} was issued in workspace {workspace!r} "
                "(or it has expired): nothing was revoked"
            )
        until = self._horizon() if record is None else record.expires_at + self._slack
        await self._revocations.revoke_token(workspace, token_id, until=until)
        return f"id:{token_id}"

    async def revoke_subject(self, workspace: str, subject: str, *, force: bool = False) -> str:
        """Revoke every token of ``subject`` in ``workspace`` issued up to now."""
        if not is_subject(subject):
            raise BadTokenRequest(f"subject {subject!r} is not a valid name")
        held = await self._inventory.listing(workspace, subject=subject)
        if not held and not force:
            raise NotIssued(
                f"no token of subject {subject!r} is on record in workspace {workspace!r} "
                "(none issued, or all expired): nothing was revoked"
            )
        for listed in held:
            record = listed.record
            await self._revocations.revoke_token(
                workspace, record.token_id, until=record.expires_at + self._slack
            )
        await self._revocations.revoke_subject(
            workspace, subject, issued_before=time.time(), until=self._horizon()
        )
        return f"sub:{subject}"

    def _horizon(self) -> float:
        return time.time() + self._max_ttl + self._slack
