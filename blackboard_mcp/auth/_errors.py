"""Auth's exceptions: each has a stable ``code`` and a ``hint``; none ever carries a secret."""

from __future__ import annotations

from typing import ClassVar

from blackboard_mcp.errors import BoardError, ErrorCode


class AuthError(BoardError):
    """Root of everything auth raises on purpose."""

    code: ClassVar[ErrorCode] = "forbidden"
    hint: ClassVar[str] = "ask the board's admin for a token that grants this"


class Unauthenticated(AuthError):
    """No token, or one that cannot be trusted."""

    code = "unauthenticated"
    hint = "send a valid bearer token"


class TokenExpired(Unauthenticated):
    """The token's exp has passed."""


class TokenNotYetValid(Unauthenticated):
    """The token's nbf or iat is in the future."""


class TokenInvalid(Unauthenticated):
    """Bad signature, algorithm, audience, issuer or claims."""


class TokenRevoked(Unauthenticated):
    """The token id or its subject was revoked."""


class UnknownKey(Unauthenticated):
    """The token names a key id this gateway does not hold."""


class KeysUnavailable(AuthError):
    """An external issuer's signing keys could not be fetched, so no verdict is possible."""

    code = "unavailable"
    hint = "the identity provider's keys could not be fetched; retry in a moment"


class Forbidden(AuthError):
    """The token is valid but does not grant this call."""


class WrongWorkspace(Forbidden):
    """The call addresses another workspace than the token's."""


class MissingCapability(Forbidden):
    """The tool requires a capability the token lacks."""


class MissingMemoryGrant(Forbidden):
    """The tool reads or writes the board and the token has no such topics."""


class TopicNotReadable(Forbidden):
    """A topic the call reads is outside the token's read scopes."""


class TopicNotWritable(Forbidden):
    """A topic the call writes is outside the token's write scopes."""


class MissingSecret(Forbidden):
    """The tool declares a secret handle the token does not hold."""


class NotAdmin(Forbidden):
    """Issuing tokens needs the admin capability."""


class GrantExceedsIssuer(Forbidden):
    """An admin tried to grant more than its own token holds."""


class PartialAdmin(Forbidden):
    """An admin token asked for with fewer than every topic."""

    hint = "give an admin token --read '*' --write '*' (or no admin capability)"


class NotIssued(AuthError):
    """A revocation names a token id or subject the board never issued in that workspace."""

    code = "not_found"
    hint = (
        "check the name with `blackboard-mcp token list` (or GET /admin/tokens); to revoke a "
        "subject ahead of any token, or a token issued before tokens were recorded, force it"
    )


class DelegationRefused(AuthError):
    """A token exchange (RFC 8693) that cannot be granted; ``oauth_error`` is the RFC's code."""

    code = "invalid_argument"
    hint = "ask for a subset of the token's own topics, capabilities and secret handles"

    def __init__(self, message: str, *, oauth_error: str = "invalid_request") -> None:
        super().__init__(message)
        self.oauth_error = oauth_error


class ContractError(AuthError):
    """A .tb contract is malformed, or a binding does not match it."""

    code = "internal"
    hint = "fix the contract file named in the message"


class BadTokenRequest(AuthError):
    """A token was asked for with a bad subject, workspace or lifetime."""

    code = "invalid_argument"
    hint = (
        "sub: 1-128 of A-Z a-z 0-9 . _ @ - (starting with a letter or digit); workspace: "
        "1-64 of a-z 0-9 . _ -; ttl: 1 second up to the board's maximum token lifetime"
    )


class InvalidScope(AuthError):
    """A topic pattern is not a name or a simple glob."""

    code = "invalid_argument"
    hint = "use topic names or globs like research-* (a-z 0-9 . _ - and *)"
