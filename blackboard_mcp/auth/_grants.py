"""What a verified token allows: a frozen value the gateway passes to every check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._scopes import topic_matches


@dataclass(frozen=True)
class Grant:
    subject: str
    workspace: str
    read_topics: tuple[str, ...]
    write_topics: tuple[str, ...]
    capabilities: frozenset[str]
    secrets: frozenset[str]
    token_id: str
    issued_at: float
    expires_at: float
    # A delegated token's chain, nearest first: (subject, token id) of the token it was
    # delegated from, of that one's parent, and so on (its nested ``act`` claims). Revoking
    # any of them revokes it.
    delegation: tuple[tuple[str, str], ...] = ()

    @property
    def ancestors(self) -> tuple[str, ...]:
        return tuple(token_id for _, token_id in self.delegation)

    def act_claim(self) -> dict[str, Any]:
        """The ``act`` claim (RFC 8693) of a token delegated from this one."""
        act: dict[str, Any] = {"sub": self.subject, "jti": self.token_id}
        inner = act
        for subject, token_id in self.delegation:
            inner["act"] = {"sub": subject, "jti": token_id}
            inner = inner["act"]
        return act

    @property
    def reads_every_topic(self) -> bool:
        return "*" in self.read_topics

    def can_read(self, topic: str) -> bool:
        return _matches_any(self.read_topics, topic)

    def can_write(self, topic: str) -> bool:
        return _matches_any(self.write_topics, topic)

    def has_capability(self, capability: str) -> bool:
        return capability in self.capabilities

    @property
    def holds_every_topic(self) -> bool:
        """Reads and writes every topic: what an admin's token must hold (SECURITY.md)."""
        return "*" in self.read_topics and "*" in self.write_topics

    def describe(self) -> dict[str, Any]:
        """The claims for a human (``token inspect``): secret handles are names, not values."""
        return {
            "sub": self.subject,
            "ws": self.workspace,
            "read": list(self.read_topics),
            "write": list(self.write_topics),
            "caps": sorted(self.capabilities),
            "secrets": sorted(self.secrets),
            "jti": self.token_id,
            "iat": self.issued_at,
            "exp": self.expires_at,
            **({"delegated_from": self.ancestors[0]} if self.delegation else {}),
        }


def _matches_any(patterns: tuple[str, ...], topic: str) -> bool:
    # A loop, not any() over a generator: asked several times on every call.
    for pattern in patterns:  # noqa: SIM110
        if topic_matches(pattern, topic):
            return True
    return False
