"""OAuth scopes to a Grant, so that any identity provider can express what a token allows.

``bb:ws:<workspace>`` (exactly one), ``bb:read:<topic pattern>`` and ``bb:write:<topic
pattern>`` (each carrying ``board_read`` / ``board_write``), ``bb:file_read`` and
``bb:admin``. Other scopes (``openid``, ``profile``, another API's) are not ours and are
left alone; a ``bb:`` scope this board does not know refuses the token, so that a typo
in an IdP's configuration is seen at once rather than as a silently narrower grant.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._errors import InvalidScope, TokenInvalid
from ._grants import Grant
from ._names import is_subject, is_token_id, is_workspace
from ._scopes import check_pattern

PREFIX = "bb:"
# Where IdPs put scopes: `scope` (RFC 9068, Keycloak; a space-separated string), `scp`
# (Entra ID delegated permissions, Okta; a string or a list), `roles` (Entra ID app roles,
# the client-credentials case; a list).
SCOPE_CLAIMS = ("scope", "scp", "roles")


class ScopeGrant:
    """What the ``bb:`` scopes of one token add up to."""

    def __init__(self) -> None:
        self.workspaces: set[str] = set()
        self.read: list[str] = []
        self.write: list[str] = []
        self.capabilities: set[str] = set()

    def add(self, scope: str) -> None:
        kind, _, rest = scope[len(PREFIX) :].partition(":")
        if kind == "ws" and rest:
            if not is_workspace(rest):
                raise TokenInvalid(f"scope {scope!r} does not name a valid workspace")
            self.workspaces.add(rest)
        elif kind in ("read", "write") and rest:
            try:
                check_pattern(rest)
            except InvalidScope:
                raise TokenInvalid(f"scope {scope!r} does not hold a topic pattern") from None
            target = self.read if kind == "read" else self.write
            if rest not in target:
                target.append(rest)
            self.capabilities.add("board_read" if kind == "read" else "board_write")
        elif scope == "bb:file_read":
            self.capabilities.add("file_read")
        elif scope == "bb:admin":
            self.capabilities.add("admin")
        else:
            raise TokenInvalid(
                f"scope {scope!r} is not one this board knows "
                "(bb:ws:, bb:read:, bb:write:, bb:file_read, bb:admin)"
            )


def scope_problem(scope: str) -> str | None:
    """Why ``scope`` cannot be advertised in ``scopes_supported``, or None when it can.

    Any scope is an RFC 6749 scope-token (printable ASCII, no space, ``"`` or ``\\``); a
    ``bb:`` scope is one this board would accept in a token.
    """
    if not scope or not all(0x21 <= ord(c) <= 0x7E and c not in '"\\' for c in scope):
        return (
            f"scope {scope!r} is not an OAuth scope (1 or more printable ASCII characters, "
            'no space, " or \\)'
        )
    if scope.startswith(PREFIX):
        try:
            ScopeGrant().add(scope)
        except TokenInvalid as exc:
            return str(exc)
    return None


def scopes_of(claims: dict[str, Any]) -> list[str]:
    """Every scope the token carries, from whichever claims its IdP uses."""
    found: list[str] = []
    for name in SCOPE_CLAIMS:
        value = claims.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            found.extend(value.split())
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            for entry in value:
                found.extend(entry.split())
        else:
            raise TokenInvalid(f"claim {name} must be a string or a list of strings")
    return found


def grant_from_scopes(
    claims: dict[str, Any], *, token_id: str, subject_claim: str = "sub"
) -> Grant:
    """The Grant of an external token whose signature and registered claims already hold."""
    subject = claims.get(subject_claim)
    if not is_subject(subject):
        raise TokenInvalid(
            f"the token's subject ({subject_claim}) is missing or not a valid name (1-128 of "
            "A-Z a-z 0-9 . _ @ -, starting with a letter or digit)"
        )
    if not is_token_id(token_id):
        raise TokenInvalid("the token's id (jti) is not 1-128 printable characters")
    scopes = ScopeGrant()
    for scope in _ours(scopes_of(claims)):
        scopes.add(scope)
    if len(scopes.workspaces) != 1:
        raise TokenInvalid(
            "an external token must carry exactly one bb:ws:<workspace> scope, this one has "
            f"{len(scopes.workspaces)}"
        )
    return Grant(
        subject=str(subject),
        workspace=next(iter(scopes.workspaces)),
        read_topics=tuple(scopes.read),
        write_topics=tuple(scopes.write),
        capabilities=frozenset(scopes.capabilities),
        secrets=frozenset(),
        token_id=token_id,
        issued_at=float(claims["iat"]),
        expires_at=float(claims["exp"]),
    )


def _ours(scopes: Iterable[str]) -> list[str]:
    return sorted({s for s in scopes if s.startswith(PREFIX)})
