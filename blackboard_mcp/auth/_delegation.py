"""Delegation (RFC 8693 token exchange): a holder narrows its own token for a sub-agent.

The child is a subset of the parent in everything: topics (each pattern covered by one of the
parent's), capabilities (never ``admin``), secret handles, and lifetime (no later than the
parent's expiry). It keeps the parent's subject, so its calls count against the same rate
limit and are audited under the same name, and its ``act`` claim names the parent token
(nested, for a chain). Revoking any ancestor revokes it (the per-call check reads the marks
of the whole chain), and the chain is at most ``MAX_DELEGATION_DEPTH`` deep.

Scope words (space-separated): ``read:<topic pattern>``, ``write:<topic pattern>``,
``board_read``, ``board_write``, ``file_read``, ``secret:<handle>``. Without a scope the
child gets all of the parent's grants but ``admin``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._errors import DelegationRefused, InvalidScope
from ._grants import Grant
from ._names import CAPABILITIES
from ._scopes import check_pattern, pattern_covers
from ._tokens import MAX_DELEGATION_DEPTH

DEFAULT_DELEGATED_TTL = 3600
MAX_SCOPE_WORDS = 128


@dataclass
class DelegatedGrant:
    """What a child token is asked to hold, in the parent's terms."""

    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    capabilities: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)

    def scope(self) -> str:
        words = [f"read:{t}" for t in self.read] + [f"write:{t}" for t in self.write]
        words += self.capabilities + [f"secret:{s}" for s in self.secrets]
        return " ".join(words)


def _invalid_scope(message: str) -> DelegationRefused:
    return DelegationRefused(message, oauth_error="invalid_scope")


def parse_scope(scope: str | None, parent: Grant) -> DelegatedGrant:
    """The child's grants: the scope's words, or the parent's own (but ``admin``)."""
    if scope is None or not scope.strip():
        return DelegatedGrant(
            read=list(parent.read_topics),
            write=list(parent.write_topics),
            capabilities=sorted(parent.capabilities - {"admin"}),
            secrets=sorted(parent.secrets),
        )
    words = scope.split()
    if len(words) > MAX_SCOPE_WORDS:
        raise _invalid_scope(f"at most {MAX_SCOPE_WORDS} scope words")
    wanted = DelegatedGrant()
    for word in dict.fromkeys(words):
        kind, colon, value = word.partition(":")
        if colon and kind in ("read", "write"):
            try:
                check_pattern(value)
            except InvalidScope:
                raise _invalid_scope(f"{word!r} does not hold a topic pattern") from None
            (wanted.read if kind == "read" else wanted.write).append(value)
        elif colon and kind == "secret" and value:
            wanted.secrets.append(value)
        elif word == "admin":
            raise _invalid_scope("admin is never delegated")
        elif not colon and word in CAPABILITIES:
            wanted.capabilities.append(word)
        else:
            raise _invalid_scope(
                f"{word!r} is not a scope word: read:<topic>, write:<topic>, board_read, "
                "board_write, file_read, secret:<handle>"
            )
    return wanted


def check_delegation(parent: Grant, wanted: DelegatedGrant) -> None:
    """Refuse anything beyond the parent (``invalid_scope``), or a chain too deep."""
    if len(parent.delegation) >= MAX_DELEGATION_DEPTH:
        raise DelegationRefused(
            f"the token is already delegated {len(parent.delegation)} deep; the depth is "
            f"bounded at {MAX_DELEGATION_DEPTH}: exchange a token nearer the one issued"
        )
    for patterns, held, what in (
        (wanted.read, parent.read_topics, "read"),
        (wanted.write, parent.write_topics, "write"),
    ):
        for pattern in patterns:
            if not any(pattern_covers(h, pattern) for h in held):
                raise _invalid_scope(f"{what}:{pattern} is beyond the token's own {what} topics")
    extra = set(wanted.capabilities) - parent.capabilities
    if extra:
        raise _invalid_scope(f"{', '.join(sorted(extra))} beyond the token's own capabilities")
    extra = set(wanted.secrets) - parent.secrets
    if extra:
        raise _invalid_scope(f"secret handles {', '.join(sorted(extra))} beyond the token's own")
    if wanted.read and "board_read" not in wanted.capabilities:
        raise _invalid_scope("read: topics need board_read to be used")
    if wanted.write and "board_write" not in wanted.capabilities:
        raise _invalid_scope("write: topics need board_write to be used")
    if not (wanted.read or wanted.write or wanted.capabilities):
        raise _invalid_scope("the scope grants nothing")


def delegated_ttl(parent: Grant, asked: int | None, now: float) -> int:
    """The child's lifetime: as asked (default an hour), cut to the parent's remaining life."""
    remaining = int(parent.expires_at - now)
    if remaining < 1:
        raise DelegationRefused("the token to exchange has expired")
    if asked is not None and asked < 1:
        raise DelegationRefused("expires_in must be a positive number of seconds")
    return min(asked or DEFAULT_DELEGATED_TTL, remaining)
