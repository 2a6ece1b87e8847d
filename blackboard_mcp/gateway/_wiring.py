"""Build a gateway from the ``BB_*`` settings: the entry point uvicorn workers call."""

from __future__ import annotations

import os
from pathlib import Path

from starlette.applications import Starlette

from blackboard_mcp.auth import (
    NoRevocations,
    TokenIssuer,
    TokenVerifier,
    external_tokens_from_settings,
    keys_from_settings,
)
from blackboard_mcp.settings import Settings, board_limits
from blackboard_mcp.store import (
    Board,
    EmbeddedRedisError,
    RedisAuditLog,
    RedisRevocationList,
    RedisTokenInventory,
    set_redis_timeout,
)

from ._app import GatewayParts, create_app
from ._logs import configure_logging
from ._metrics import MULTIPROCESS_DIR_ENV
from ._oauth_metadata import MCP_PATH
from ._token_inventory import RecordedTokens


def build_parts(settings: Settings, *, metrics_dir: Path | None = None) -> GatewayParts:
    if not settings.redis_url:
        # `serve` starts the embedded Redis and passes its URL to the workers.
        raise EmbeddedRedisError("no BB_REDIS_URL: start with `blackboard-mcp serve`")
    set_redis_timeout(settings.redis_timeout_seconds)
    board = Board.from_url(
        settings.redis_url,
        limits=board_limits(settings),
        pool_size=settings.redis_pool_size,
        pool_wait_seconds=settings.redis_pool_timeout,
        cluster=settings.redis_cluster,
    )
    signing_key, verification_keys = keys_from_settings(settings)
    revocations = RedisRevocationList(client=board.client)
    # The edge verifies signatures and claims only; revocation needs Redis, so it is
    # checked per call where a Redis outage becomes a clean `unavailable` tool error.
    verifier = TokenVerifier(
        keys=verification_keys,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        leeway=settings.jwt_leeway_seconds,
        revocations=NoRevocations(),
        max_ttl_seconds=settings.max_token_ttl,
        # Settings refuse an external issuer without BB_PUBLIC_URL: the audience is fixed.
        external=external_tokens_from_settings(
            settings, resource=f"{settings.public_url}{MCP_PATH}"
        ),
    )
    issuer = (
        TokenIssuer(
            signing_key=signing_key,
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            max_ttl_seconds=settings.max_token_ttl,
        )
        if signing_key is not None
        else None
    )
    audit = RedisAuditLog(redis=board.redis, maxlen=settings.audit_maxlen)
    return GatewayParts(
        settings=settings,
        board=board,
        verifier=verifier,
        revocations=revocations,
        audit=audit,
        inventory=RecordedTokens(RedisTokenInventory(client=board.client)),
        issuer=issuer,
        metrics_dir=metrics_dir,
    )


def app_from_env() -> Starlette:
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    # Set by `serve` for its workers only; prometheus_client reads the same variable to
    # count into files there (gateway/_metrics.py).
    shared = os.environ.get(MULTIPROCESS_DIR_ENV)
    return create_app(build_parts(settings, metrics_dir=Path(shared) if shared else None))
