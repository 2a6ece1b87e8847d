"""Issuing and verifying per-agent JWTs with pyjwt; pyjwt's errors are mapped here, once."""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import jwt

from ._decoding import check_lifetime, decode_claims
from ._errors import (
    BadTokenRequest,
    GrantExceedsIssuer,
    NotAdmin,
    PartialAdmin,
    TokenInvalid,
    TokenRevoked,
)
from ._external import ExternalTokens
from ._grants import Grant
from ._names import is_subject, is_token_id, is_workspace
from ._revocations import RevocationList
from ._scopes import check_pattern, pattern_covers
from ._signing_keys import SigningKey, VerificationKeys

REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub", "jti"]
MAX_TOKEN_CHARS = 8192
# The documented default of BB_MAX_TOKEN_TTL. A revocation is kept this long when the
# token's own expiry is not known, so the bound is what makes revocations finite.
DEFAULT_MAX_TOKEN_TTL = 90 * 86400


class TokenIssuer:
    def __init__(
        self,
        *,
        signing_key: SigningKey,
        issuer: str,
        audience: str,
        max_ttl_seconds: int = DEFAULT_MAX_TOKEN_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = signing_key
        self._issuer = issuer
        self._audience = audience
        self._max_ttl = max_ttl_seconds
        # The time a token is issued at (iat, nbf) and counted from (exp).
        self._clock = clock

    @property
    def max_ttl_seconds(self) -> int:
        return self._max_ttl

    def check_request(
        self,
        *,
        subject: str,
        workspace: str,
        read: Sequence[str],
        write: Sequence[str],
        ttl_seconds: int,
    ) -> None:
        """Refuse a token nobody could use safely: raises BadTokenRequest or InvalidScope."""
        if not is_subject(subject):
            raise BadTokenRequest(f"subject {subject!r} is not a valid name")
        if not is_workspace(workspace):
            raise BadTokenRequest(
                f"workspace {workspace!r} is not a valid name: 1-64 of a-z 0-9 . _ -, "
                "starting with a letter or digit"
            )
        if not isinstance(ttl_seconds, int) or isinstance(ttl_seconds, bool):
            raise BadTokenRequest("the ttl must be a whole number of seconds")
        if not 0 < ttl_seconds <= self._max_ttl:
            raise BadTokenRequest(
                f"the ttl must be between 1 and {self._max_ttl} seconds "
                f"({_in_largest_unit(self._max_ttl)}, the board's maximum token lifetime, "
                "BB_MAX_TOKEN_TTL)",
                max_ttl_seconds=self._max_ttl,
            )
        for pattern in (*read, *write):
            check_pattern(pattern)

    def issue(
        self,
        *,
        subject: str,
        workspace: str,
        read: Sequence[str],
        write: Sequence[str],
        capabilities: Sequence[str],
        secrets: Sequence[str] = (),
        ttl_seconds: int,
        act: dict[str, Any] | None = None,
    ) -> str:
        """A signed token; ``act`` (RFC 8693) names the token it is delegated from."""
        self.check_request(
            subject=subject, workspace=workspace, read=read, write=write, ttl_seconds=ttl_seconds
        )
        now = int(self._clock())
        claims = {
            "iss": self._issuer,
            "aud": self._audience,
            "sub": subject,
            "ws": workspace,
            "read": list(read),
            "write": list(write),
            "caps": sorted(set(capabilities)),
            "secrets": sorted(set(secrets)),
            "iat": now,
            "nbf": now,
            "exp": now + ttl_seconds,
            "jti": uuid.uuid4().hex,
        }
        if act is not None:
            claims["act"] = act
        return jwt.encode(
            claims, self._key.key, algorithm=self._key.algorithm, headers={"kid": self._key.kid}
        )


class TokenVerifier:
    def __init__(
        self,
        *,
        keys: VerificationKeys,
        issuer: str,
        audience: str,
        leeway: int,
        revocations: RevocationList,
        cache_size: int = 4096,
        max_ttl_seconds: int = DEFAULT_MAX_TOKEN_TTL,
        external: ExternalTokens | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keys = keys
        # What a remembered verdict's expiry is checked against; pyjwt checks a new token's
        # claims against the system clock itself.
        self._clock = clock
        # Tokens of external identity providers, told apart by their `iss`.
        self._external = external
        self._issuer = issuer
        self._audience = audience
        self._leeway = leeway
        self._max_ttl = max_ttl_seconds
        self._revocations = revocations
        self._cache_size = cache_size
        # Verified tokens by their exact text. An agent sends the same token on every call,
        # and checking its signature and claims again each time was a measurable part of a
        # call's cost. Only the expiry can change a verdict later; it is checked on each hit.
        self._verified: OrderedDict[str, Grant] = OrderedDict()
        # Which of them an external issuer signed: their key is checked again on each hit.
        self._external_verified: set[str] = set()

    def decode(self, token: str) -> Grant:
        """Signature and claims of one of the board's own tokens only (no I/O)."""
        grant = self._cached(token)
        if grant is None:
            grant = self._remember(token, self._decode_uncached(token))
        return grant

    async def check(self, token: str) -> Grant:
        """Signature and claims of a token from any accepted issuer, without revocation.

        An external issuer's keys may have to be fetched first; see ``_jwks``.
        """
        grant = self._cached(token)
        if grant is not None:
            if token in self._external_verified and self._external is not None:
                # An external issuer may withdraw the key that signed it (a compromised
                # key): the key must still be in its published set, as last fetched.
                try:
                    await self._external.check_key(token)
                except Exception:
                    self._verified.pop(token, None)
                    self._external_verified.discard(token)
                    raise
            return grant
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenInvalid("the token is too long")
        if self._external is not None and self._external.is_external(token):
            grant = await self._external.decode(token)
            if self._cache_size > 0:
                self._external_verified.add(token)
        else:
            grant = self._decode_uncached(token)
        self._remember(token, grant)
        return grant

    def _cached(self, token: str) -> Grant | None:
        grant = self._verified.get(token)
        if grant is not None:
            if self._clock() <= grant.expires_at + self._leeway:
                self._verified.move_to_end(token)
                return grant
            del self._verified[token]
            self._external_verified.discard(token)
        return None

    def _remember(self, token: str, grant: Grant) -> Grant:
        if self._cache_size > 0:
            self._verified[token] = grant
            if len(self._verified) > self._cache_size:
                evicted, _ = self._verified.popitem(last=False)
                self._external_verified.discard(evicted)
        return grant

    def _decode_uncached(self, token: str) -> Grant:
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenInvalid("the token is too long")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenInvalid("the token is not a JWT") from exc
        algorithm, key = self._keys.for_kid(header.get("kid"))
        claims = decode_claims(
            token,
            key,
            algorithms=[algorithm],
            audience=self._audience,
            issuer=self._issuer,
            leeway=self._leeway,
            required=REQUIRED_CLAIMS,
        )
        return check_lifetime(_grant(claims), self._max_ttl)

    async def verify(self, token: str) -> Grant:
        grant = await self.check(token)
        if await self._revocations.is_revoked(grant):
            raise TokenRevoked("this token has been revoked")
        return grant


def _strings(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TokenInvalid(f"claim {name} must be a list of strings")
    return tuple(value)


def _number(value: object, name: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TokenInvalid(f"claim {name} must be a number")
    return float(value)


# How many tokens deep a delegation may go: a token delegated from one delegated from ... an
# issued one. Each level is one more revocation mark every call of the deepest checks.
MAX_DELEGATION_DEPTH = 3


def _chain(act: object) -> tuple[tuple[str, str], ...]:
    """(subject, token id) of a delegated token's ancestors, nearest first, from the nested
    ``act`` claims the board writes."""
    chain: list[tuple[str, str]] = []
    while act is not None:
        if not isinstance(act, dict):
            raise TokenInvalid("claim act must be an object")
        subject, token_id = act.get("sub"), act.get("jti")
        if not is_subject(subject) or not is_token_id(token_id):
            raise TokenInvalid("claim act must name the parent token's sub and jti")
        chain.append((str(subject), str(token_id)))
        if len(chain) > MAX_DELEGATION_DEPTH:
            raise TokenInvalid("the token is delegated deeper than the board allows")
        act = act.get("act")
    return tuple(chain)


def _grant(claims: dict[str, Any]) -> Grant:
    delegation = _chain(claims.get("act"))
    workspace = claims.get("ws")
    if not isinstance(workspace, str) or not workspace:
        raise TokenInvalid("the token has no workspace claim")
    if not is_workspace(workspace):
        raise TokenInvalid("the token's workspace is not a valid name")
    if not is_subject(claims["sub"]):
        raise TokenInvalid("the token's subject is not a valid name")
    if not is_token_id(claims["jti"]):
        raise TokenInvalid("the token's id (jti) is not 1-128 printable characters")
    return Grant(
        subject=claims["sub"],
        workspace=workspace,
        read_topics=_strings(claims.get("read", []), "read"),
        write_topics=_strings(claims.get("write", []), "write"),
        capabilities=frozenset(_strings(claims.get("caps", []), "caps")),
        secrets=frozenset(_strings(claims.get("secrets", []), "secrets")),
        token_id=claims["jti"],
        issued_at=_number(claims["iat"], "iat"),
        expires_at=_number(claims["exp"], "exp"),
        delegation=delegation,
    )


def grant_of(token: str) -> Grant:
    """The grant of a token this process just signed (no verification needed)."""
    return _grant(jwt.decode(token, options={"verify_signature": False}))


def require_admin(grant: Grant) -> None:
    """An admin acts on the whole workspace, so its token must read and write every topic:
    one with fewer topics is no admin at all (SECURITY.md), whoever signed it."""
    if not grant.has_capability("admin"):
        raise NotAdmin("this needs the admin capability")
    if not grant.holds_every_topic:
        raise NotAdmin(
            "an admin token must read and write every topic (*); this one's admin "
            "capability is not honoured"
        )


def check_admin_topics(
    capabilities: Sequence[str], read: Sequence[str], write: Sequence[str]
) -> None:
    """Refuse an admin token that would not hold every topic: it would be refused anyway."""
    if "admin" in capabilities and not ("*" in read and "*" in write):
        raise PartialAdmin(
            "an admin token must read and write every topic (*): an admin's deletes, "
            "retention, audit and revocations reach the whole workspace"
        )


def check_usable(capabilities: Sequence[str], read: Sequence[str], write: Sequence[str]) -> None:
    """Refuse a token that could do nothing it names."""
    hint = "give read topics with board_read, write topics with board_write"
    if read and "board_read" not in capabilities:
        raise BadTokenRequest(
            "read topics are given, but without board_read the token cannot read them",
            hint=hint,
        )
    if write and "board_write" not in capabilities:
        raise BadTokenRequest(
            "write topics are given, but without board_write the token cannot write them",
            hint=hint,
        )
    if not (read or write or capabilities):
        raise BadTokenRequest(
            "the token would allow nothing: give it topics (read, write) with the "
            "capabilities to use them (board_read, board_write)",
            hint=hint,
        )


def check_admin_grant(
    issuer: TokenIssuer,
    admin: Grant,
    *,
    subject: str,
    workspace: str,
    read: Sequence[str],
    write: Sequence[str],
    capabilities: Sequence[str],
    secrets: Sequence[str],
    ttl_seconds: int,
) -> None:
    """Refuse a token an admin may not issue: an admin can only grant what its own holds."""
    require_admin(admin)
    issuer.check_request(
        subject=subject, workspace=workspace, read=read, write=write, ttl_seconds=ttl_seconds
    )
    check_admin_topics(capabilities, read, write)
    check_usable(capabilities, read, write)
    if workspace != admin.workspace:
        raise GrantExceedsIssuer(f"the admin token is for workspace {admin.workspace!r}")
    for wanted, held, what in (
        (read, admin.read_topics, "read"),
        (write, admin.write_topics, "write"),
    ):
        for pattern in wanted:
            check_pattern(pattern)
            if not any(pattern_covers(h, pattern) for h in held):
                raise GrantExceedsIssuer(f"{what} scope {pattern!r} exceeds the admin's own")
    extra = set(capabilities) - admin.capabilities
    if extra:
        raise GrantExceedsIssuer(f"capabilities {sorted(extra)} exceed the admin's own")
    extra = set(secrets) - admin.secrets
    if extra:
        raise GrantExceedsIssuer(f"secret handles {sorted(extra)} exceed the admin's own")
    remaining = int(admin.expires_at - time.time())
    if ttl_seconds > remaining:
        raise GrantExceedsIssuer("the ttl outlives the admin's own token")


def issue_for_admin(
    issuer: TokenIssuer,
    admin: Grant,
    *,
    subject: str,
    workspace: str,
    read: list[str],
    write: list[str],
    capabilities: list[str],
    secrets: list[str],
    ttl_seconds: int,
) -> tuple[str, Grant]:
    """A token an admin may issue (``check_admin_grant``), signed but not recorded."""
    check_admin_grant(
        issuer,
        admin,
        subject=subject,
        workspace=workspace,
        read=read,
        write=write,
        capabilities=capabilities,
        secrets=secrets,
        ttl_seconds=ttl_seconds,
    )
    token = issuer.issue(
        subject=subject,
        workspace=workspace,
        read=read,
        write=write,
        capabilities=capabilities,
        secrets=secrets,
        ttl_seconds=ttl_seconds,
    )
    return token, grant_of(token)


def _in_largest_unit(seconds: int) -> str:
    """``seconds`` as people write a lifetime: 90d, 12h, 30m, or 45s."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
