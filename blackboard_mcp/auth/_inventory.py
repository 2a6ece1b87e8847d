"""The record of every token the board issues, and what an operator is shown of it.

Auth decides what a record holds; where records are kept is the store's (a Protocol here,
Redis there), as with revocations. A record names a token's grants (secret handles by name,
never a value), who issued it and the token it was delegated from; the token itself is never
kept. Records go when their token expires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

Status = Literal["active", "revoked", "expired"]


@dataclass(frozen=True)
class TokenRecord:
    token_id: str
    subject: str
    workspace: str
    read: tuple[str, ...]
    write: tuple[str, ...]
    capabilities: tuple[str, ...]
    secrets: tuple[str, ...]
    issued_at: float
    expires_at: float
    issued_by: str
    # The token this one was delegated from (``/oauth/token``), and that one's ancestors.
    parent: str | None = None
    ancestors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.token_id,
            "sub": self.subject,
            "ws": self.workspace,
            "read": list(self.read),
            "write": list(self.write),
            "caps": list(self.capabilities),
            "secrets": list(self.secrets),
            "iat": self.issued_at,
            "exp": self.expires_at,
            "by": self.issued_by,
            "parent": self.parent,
            "ancestors": list(self.ancestors),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenRecord:
        return cls(
            token_id=str(data["id"]),
            subject=str(data["sub"]),
            workspace=str(data["ws"]),
            read=tuple(str(t) for t in data.get("read", ())),
            write=tuple(str(t) for t in data.get("write", ())),
            capabilities=tuple(str(c) for c in data.get("caps", ())),
            secrets=tuple(str(s) for s in data.get("secrets", ())),
            issued_at=float(data["iat"]),
            expires_at=float(data["exp"]),
            issued_by=str(data.get("by", "")),
            parent=None if data.get("parent") is None else str(data["parent"]),
            ancestors=tuple(str(a) for a in data.get("ancestors", ())),
        )


@dataclass(frozen=True)
class ListedToken:
    """A record as an operator sees it: with its status and when it was last used."""

    record: TokenRecord
    status: Status
    last_used: float | None

    def describe(self) -> dict[str, Any]:
        r = self.record
        return {
            "id": r.token_id,
            "sub": r.subject,
            "status": self.status,
            "read": list(r.read),
            "write": list(r.write),
            "caps": list(r.capabilities),
            "secrets": list(r.secrets),
            "issued": r.issued_at,
            "issued_by": r.issued_by,
            "expires": r.expires_at,
            "parent": r.parent,
            "last_used": self.last_used,
        }


class TokenInventory(Protocol):
    async def record(self, record: TokenRecord) -> None:
        """Keep ``record`` until its token expires."""
        ...

    async def find(self, workspace: str, token_id: str) -> TokenRecord | None:
        """The record of token ``token_id`` of ``workspace``, if one is kept."""
        ...

    async def listing(self, workspace: str, *, subject: str | None = None) -> list[ListedToken]:
        """The kept records of ``workspace`` (of ``subject`` only, if given), oldest first,
        with each token's status and last use."""
        ...
