"""Access tokens from external identity providers (OAuth 2.1, the MCP authorization spec).

A token is external when its ``iss`` is one of the configured issuers; everything else is
left to the board's own verifier. An external token must be signed with an asymmetric key
from its issuer's key set, name this board's resource identifier (or another configured
audience) in ``aud``, and carry exactly one ``bb:ws:`` scope; its grant comes from its
scopes (see ``_oauth_scopes``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import jwt

from ._decoding import check_lifetime, decode_claims
from ._errors import TokenInvalid
from ._grants import Grant
from ._jwks import KeySource
from ._oauth_scopes import grant_from_scopes

# With the subject claim (``subject_claim``), checked when the grant is made.
REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud"]


class ExternalTokens:
    def __init__(
        self,
        *,
        sources: Mapping[str, KeySource],
        audiences: Sequence[str],
        leeway: int,
        max_ttl_seconds: int,
        subject_claim: str = "sub",
    ) -> None:
        if not audiences:
            raise ValueError("external tokens need an audience to be checked against")
        self._sources = dict(sources)
        self._audiences = list(audiences)
        self._leeway = leeway
        self._max_ttl = max_ttl_seconds
        self._subject_claim = subject_claim

    def is_external(self, token: str) -> bool:
        """Whether the token claims to come from one of the configured issuers (unverified)."""
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return False
        return isinstance(claims.get("iss"), str) and claims["iss"] in self._sources

    async def check_key(self, token: str) -> None:
        """Raise (UnknownKey) unless the key that signed ``token`` (verified before) is still
        in its issuer's key set; the set is fetched again when it is older than its cache
        time, so a withdrawn key stops working within that time."""
        header = jwt.get_unverified_header(token)
        issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
        source = self._sources[str(issuer)]
        kid = header.get("kid")
        await source.key(kid if isinstance(kid, str) else None)

    async def decode(self, token: str) -> Grant:
        """Signature, registered claims and scopes; raises an Unauthenticated on any doubt."""
        try:
            header = jwt.get_unverified_header(token)
            issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
        except jwt.PyJWTError as exc:
            raise TokenInvalid("the token is not a JWT") from exc
        source = self._sources.get(issuer) if isinstance(issuer, str) else None
        if source is None:
            raise TokenInvalid("the token's issuer is not one this board accepts")
        kid = header.get("kid")
        key = await source.key(kid if isinstance(kid, str) else None)
        claims = decode_claims(
            token,
            key.key,
            algorithms=list(key.algorithms),
            audience=self._audiences,
            issuer=issuer,
            leeway=self._leeway,
            required=REQUIRED_CLAIMS,
        )
        for name in ("iat", "exp"):
            if not isinstance(claims[name], int | float) or isinstance(claims[name], bool):
                raise TokenInvalid(f"claim {name} must be a number")
        grant = grant_from_scopes(
            claims, token_id=token_id_of(claims, token), subject_claim=self._subject_claim
        )
        return check_lifetime(grant, self._max_ttl)


def token_id_of(claims: Mapping[str, Any], token: str) -> str:
    """``jti``; else Entra ID's ``uti``; else a digest of the token, so revoking it by
    presenting it still works."""
    for name in ("jti", "uti"):
        value = claims.get(name)
        if isinstance(value, str) and value:
            return value
    return "sha256-" + hashlib.sha256(token.encode()).hexdigest()[:40]
