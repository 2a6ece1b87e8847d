"""Checking a JWT's signature and registered claims, for our own tokens and external ones alike.

pyjwt's errors become the project's here, once, so both verifiers refuse a token the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jwt

from ._errors import TokenExpired, TokenInvalid, TokenNotYetValid
from ._grants import Grant


def decode_claims(
    token: str,
    key: Any,
    *,
    algorithms: Sequence[str],
    audience: str | Sequence[str],
    issuer: str | None,
    leeway: int,
    required: Sequence[str],
) -> dict[str, Any]:
    # The caller takes the algorithms from the key, never from the token's header.
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=list(algorithms),
            audience=audience,
            issuer=issuer,
            leeway=leeway,
            options={"require": list(required)},
        )
    except jwt.ExpiredSignatureError as exc:
        raise TokenExpired("the token has expired") from exc
    except jwt.ImmatureSignatureError as exc:
        raise TokenNotYetValid("the token is not valid yet") from exc
    except jwt.InvalidAudienceError as exc:
        raise TokenInvalid("the token was not issued for this board (aud)") from exc
    except jwt.PyJWTError as exc:
        raise TokenInvalid(f"the token was refused: {exc.__class__.__name__}") from exc
    return claims


def check_lifetime(grant: Grant, max_ttl_seconds: int) -> Grant:
    # Whoever issued it, a token is held to the board's rule: a revocation by id or subject
    # is kept for the longest lifetime, no longer, so a longer-lived token could outlive it.
    if grant.expires_at - grant.issued_at > max_ttl_seconds:
        raise TokenInvalid("the token's lifetime exceeds the board's maximum")
    return grant
