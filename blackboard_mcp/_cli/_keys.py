"""The signing key the commands use: configured, or the one `serve` keeps in the data dir.

Only `serve` creates that key. Any other command creating one would sign tokens that the
running server rejects (it has its own key in its own data dir), with nothing to say why.
"""

from __future__ import annotations

from blackboard_mcp.settings import Settings

from ._errors import ConfigurationError

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
