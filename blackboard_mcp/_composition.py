"""Where the settings become objects, and the only place: the board, the auth parts (keys,
verifier, issuer, external issuers) and the gateway's parts, for `serve`'s workers and the
CLI's commands alike.

The settings import nothing of the package and auth takes plain values, so this module reads
each setting and hands on its value. The gateway is imported inside ``gateway_parts`` only: a
command builds its board and its keys without loading the HTTP edge (Starlette, the MCP SDK).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails

from blackboard_mcp._token_records import RecordedTokens
from blackboard_mcp.auth import (
    ExternalTokens,
    KeySource,
    NoRevocations,
    RevocationList,
    Revoker,
    SigningKey,
    TokenInventory,
    TokenIssuer,
    TokenVerifier,
    VerificationKeys,
    load_signing_keys,
    scope_problem,
)
from blackboard_mcp.settings import Settings
from blackboard_mcp.store import (
    Board,
    BoardLimits,
    EmbeddedRedisError,
    RedisAuditLog,
    RedisCallAdmission,
    RedisRateLimiter,
    RedisRevocationList,
    RedisTokenInventory,
    RoutedClient,
    open_client,
)

if TYPE_CHECKING:
    from blackboard_mcp.gateway import GatewayParts


def read_settings(**values: Any) -> Settings:
    """The settings from the environment (``values`` win), refused like any malformed setting
    when BB_OAUTH_SCOPES_SUPPORTED names a ``bb:`` scope this board would not accept: that
    grammar is auth's, and the settings import nothing of the package."""
    settings = Settings(**values)
    for scope in settings.oauth_scopes_supported:
        problem = scope_problem(scope)
        if problem is not None:
            detail = InitErrorDetails(
                type="value_error",
                loc=("oauth_scopes_supported",),
                input=settings.oauth_scopes_supported,
                ctx={"error": ValueError(problem)},
            )
            raise ValidationError.from_exception_data(Settings.__name__, [detail])
    return settings


def board_limits(settings: Settings) -> BoardLimits:
    """The store's limits as ``settings`` set them."""
    return BoardLimits(
        offload_bytes=settings.offload_bytes,
        max_body_bytes=settings.max_body_bytes,
        changelog_maxlen=settings.changelog_maxlen,
        cas_max_retries=settings.cas_max_retries,
        source_root=settings.source_root,
        source_max_bytes=settings.source_max_bytes,
        source_read_timeout_seconds=settings.source_read_timeout_seconds,
        source_read_threads=settings.source_read_threads,
        wait_replicas=settings.wait_replicas,
        wait_timeout_ms=settings.wait_replicas_timeout_ms,
        history_versions=settings.history_versions,
        history_max_age_seconds=settings.history_max_age_seconds,
        search_window=settings.search_window,
    )


def open_board(settings: Settings, *, url: str | None = None) -> Board:
    """The board on ``url`` (else BB_REDIS_URL) with every store setting: its limits, its pool
    and how long a call waits for a connection, how long for Redis, whether it is a cluster."""
    url = url or settings.redis_url
    if not url:
        # `serve` starts the embedded Redis and passes its URL to the workers.
        raise EmbeddedRedisError("no BB_REDIS_URL: start with `blackboard-mcp serve`")
    return Board.from_url(
        url,
        limits=board_limits(settings),
        pool_size=settings.redis_pool_size,
        pool_wait_seconds=settings.redis_pool_timeout,
        timeout_seconds=settings.redis_timeout_seconds,
        cluster=settings.redis_cluster,
    )


def open_key_client(settings: Settings, *, url: str) -> RoutedClient:
    """A client on ``url`` for the commands whose keys are named in full (revocations, the
    token inventory, the audit stream), single or cluster, with the Redis timeout set."""
    return open_client(
        url, cluster=settings.redis_cluster, timeout_seconds=settings.redis_timeout_seconds
    )


def signing_keys(settings: Settings) -> tuple[SigningKey | None, VerificationKeys]:
    """The board's own keys: Ed25519 when a key file or directory is set, else the shared
    secret (BB_JWT_SECRET_FILE wins over BB_JWT_SECRET)."""
    secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else None
    return load_signing_keys(
        secret=secret,
        secret_file=settings.jwt_secret_file,
        private_key_file=settings.jwt_private_key_file,
        public_keys_dir=settings.jwt_public_keys_dir,
    )


def token_issuer(settings: Settings, signing_key: SigningKey) -> TokenIssuer:
    return TokenIssuer(
        signing_key=signing_key,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        max_ttl_seconds=settings.max_token_ttl,
    )


def token_verifier(
    settings: Settings,
    keys: VerificationKeys,
    *,
    external: ExternalTokens | None = None,
    leeway: int | None = None,
) -> TokenVerifier:
    """A verifier of signatures and claims. Revocation needs Redis, so it is checked per call,
    where a Redis outage becomes a clean `unavailable`; ``leeway`` replaces the configured one
    (`token inspect` reads an expired token's claims)."""
    return TokenVerifier(
        keys=keys,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        leeway=settings.jwt_leeway_seconds if leeway is None else leeway,
        revocations=NoRevocations(),
        max_ttl_seconds=settings.max_token_ttl,
        external=external,
    )


def token_revoker(
    settings: Settings, *, revocations: RevocationList, inventory: TokenInventory
) -> Revoker:
    """Revocations kept as long as a token can live (BB_MAX_TOKEN_TTL, past the leeway)."""
    return Revoker(
        revocations=revocations,
        inventory=inventory,
        max_ttl_seconds=settings.max_token_ttl,
        leeway=settings.jwt_leeway_seconds,
    )


def external_tokens(settings: Settings, *, resource: str) -> ExternalTokens | None:
    """The external issuers' tokens (BB_OAUTH_ISSUER), or None when there are none.

    ``resource`` is this board's resource identifier, the audience every external token must
    name (besides any BB_OAUTH_AUDIENCE).
    """
    if not settings.oauth_issuer:
        return None

    def source(*, jwks_url: str | None = None, issuer: str | None = None) -> KeySource:
        return KeySource(
            jwks_url=jwks_url,
            issuer=issuer,
            timeout_seconds=settings.oauth_fetch_timeout_seconds,
            cache_seconds=settings.oauth_jwks_cache_seconds,
            refetch_seconds=settings.oauth_refetch_seconds,
        )

    # One key set named for every issuer, or each issuer's own from its metadata.
    shared = source(jwks_url=settings.oauth_jwks_url) if settings.oauth_jwks_url else None
    return ExternalTokens(
        sources={issuer: shared or source(issuer=issuer) for issuer in settings.oauth_issuer},
        audiences=[resource, *settings.oauth_audience],
        leeway=settings.jwt_leeway_seconds,
        max_ttl_seconds=settings.max_token_ttl,
        subject_claim=settings.oauth_subject_claim,
    )


def gateway_parts(settings: Settings, *, metrics_dir: Path | None = None) -> GatewayParts:
    """Everything the gateway's app is built from (``create_app``), on BB_REDIS_URL."""
    from blackboard_mcp.gateway import MCP_PATH, GatewayParts

    board = open_board(settings)
    signing_key, verification_keys = signing_keys(settings)
    revocations = RedisRevocationList(client=board.redis.routed)
    inventory = RecordedTokens(RedisTokenInventory(client=board.redis.routed))
    return GatewayParts(
        settings=settings,
        board=board,
        # The edge verifies signatures and claims only; each call checks revocation.
        verifier=token_verifier(
            settings,
            verification_keys,
            # Settings refuse an external issuer without BB_PUBLIC_URL: the audience is fixed.
            external=external_tokens(settings, resource=f"{settings.public_url}{MCP_PATH}"),
        ),
        revocations=revocations,
        audit=RedisAuditLog(redis=board.redis, maxlen=settings.audit_maxlen),
        inventory=inventory,
        admission=RedisCallAdmission(
            redis=board.redis,
            limiter=RedisRateLimiter(
                client=board.redis.routed, per_minute=settings.rate_limit_per_minute
            ),
        ),
        revoker=token_revoker(settings, revocations=revocations, inventory=inventory),
        issuer=token_issuer(settings, signing_key) if signing_key is not None else None,
        metrics_dir=metrics_dir,
    )
