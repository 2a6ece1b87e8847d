"""The CLI's key files: the signing key the commands use, configured or the one `serve` keeps
in the data dir, and the issuer and verifier made from it.

Only `serve` creates that key. Any other command creating one would sign tokens that the
running server rejects (it has its own key in its own data dir), with nothing to say why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from blackboard_mcp.settings import Settings

from ._errors import ConfigurationError

if TYPE_CHECKING:
    from blackboard_mcp.auth import TokenIssuer, TokenVerifier

DEFAULT_SECRET_FILE = "jwt_secret"


def with_signing_key(settings: Settings, *, create: bool) -> tuple[Settings, bool]:
    """Settings that name a key, and whether it was created now.

    With no key configured, the data dir's secret is used; ``create`` (for `serve` only)
    generates it on first start, otherwise its absence is an error naming where it looked.
    """
    if (
        settings.jwt_secret
        or settings.jwt_secret_file
        or settings.jwt_private_key_file
        or settings.jwt_public_keys_dir
    ):
        return settings, False
    path = settings.data_dir / DEFAULT_SECRET_FILE
    created = False
    if not path.exists():
        if not create:
            raise ConfigurationError(
                f"no signing key: none configured, and no {DEFAULT_SECRET_FILE} in the "
                f"data dir {settings.data_dir}",
                hint="set BB_DATA_DIR to the server's data dir, or BB_JWT_SECRET_FILE "
                "(or BB_JWT_PRIVATE_KEY_FILE) to its key; only `serve` creates one",
            )
        from blackboard_mcp.auth import generate_hs_secret_file

        generate_hs_secret_file(path)
        created = True
    return settings.model_copy(update={"jwt_secret_file": path}), created


def key_issuer(settings: Settings) -> TokenIssuer:
    """An issuer with the configured signing key; refused where there are only keys to verify."""
    from blackboard_mcp._composition import signing_keys, token_issuer

    signing, _ = signing_keys(settings)
    if signing is None:
        raise ConfigurationError(
            "no signing key is configured here, only keys to verify with",
            hint="set BB_JWT_SECRET_FILE or BB_JWT_PRIVATE_KEY_FILE to the server's signing key",
        )
    return token_issuer(settings, signing)


def offline_verifier(settings: Settings, *, leeway: int | None = None) -> TokenVerifier:
    """A verifier with this data dir's keys that checks signature and claims, not revocation.

    ``leeway`` past the configured one lets `token inspect` read an expired token's claims.
    """
    from blackboard_mcp._composition import signing_keys, token_verifier

    keyed, _ = with_signing_key(settings, create=False)
    return token_verifier(settings, signing_keys(keyed)[1], leeway=leeway)
