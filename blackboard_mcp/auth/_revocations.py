"""The revocation Protocol; the Redis implementation lives in the store."""

from __future__ import annotations

from typing import Protocol

from ._grants import Grant


class RevocationList(Protocol):
    async def is_revoked(self, grant: Grant) -> bool: ...

    async def revoke_token(self, token_id: str, expires_at: float | None) -> None: ...

    async def revoke_subject(self, subject: str) -> None: ...


class NoRevocations:
    """For checks that must not do I/O (the HTTP edge); revocation is checked per call."""

    async def is_revoked(self, grant: Grant) -> bool:
        return False

    async def revoke_token(self, token_id: str, expires_at: float | None) -> None:
        raise NotImplementedError("NoRevocations cannot revoke")

    async def revoke_subject(self, subject: str) -> None:
        raise NotImplementedError("NoRevocations cannot revoke")
