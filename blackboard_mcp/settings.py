"""The one settings object. Every knob is a ``BB_*`` environment variable.

A leaf: it imports nothing of the package. What the settings become (the board, the auth
parts, the gateway's parts) is built in one place, blackboard_mcp/_composition.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# The shortest HS256 secret accepted (256 bits).
MIN_HS_SECRET_BYTES = 32


def default_data_dir() -> Path:
    """Where the embedded Redis keeps its AOF and the generated signing key."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "blackboard-mcp"


class Settings(BaseSettings):
    """Configuration for every blackboard-mcp process, read once and passed down."""

    model_config = SettingsConfigDict(env_prefix="BB_", extra="ignore", frozen=True)

    # Store
    redis_url: str | None = None
    # Whether BB_REDIS_URL names a node of a Redis Cluster: auto asks it (INFO cluster) at
    # start-up; on/off say so, e.g. where a node may be down when a gateway starts.
    redis_cluster: Literal["auto", "on", "off"] = "auto"
    data_dir: Path = Field(default_factory=default_data_dir)
    appendfsync: Literal["everysec", "always"] = "everysec"
    # Restarts in a row of a dead embedded Redis before `serve` gives up and exits 5.
    embedded_restarts: int = Field(default=6, ge=0)
    changelog_maxlen: int = 100_000
    audit_maxlen: int = 100_000
    # How long the audit writer waits after a call's record for more to share its round trip.
    audit_linger_seconds: float = Field(default=0.005, ge=0, le=1)
    offload_bytes: int = 10 * 1024
    max_body_bytes: int = 1024 * 1024
    # `blackboard-mcp import` reads its file a line at a time (one note a line, its content
    # JSON-escaped: up to 6 bytes a character): a longer line is refused before any write.
    import_max_line_bytes: int = Field(default=8 * 1024 * 1024, ge=4096)
    source_root: Path | None = None
    source_max_bytes: int = 5 * 1024 * 1024
    # source_path files are read on worker threads (store/sources/_source_reader.py): at most this
    # many at once per process, each given this long before the call answers `unavailable`.
    source_read_timeout_seconds: float = Field(default=10.0, gt=0)
    source_read_threads: int = Field(default=4, ge=1)
    cas_max_retries: int = 16
    # How often a gateway process tries to sweep notes past their workspace's retention
    # (store/lifecycle/_retention.py); one process at a time sweeps, holding a lease for 3 periods.
    retention_sweep_seconds: float = Field(default=60.0, gt=0)
    # Connections per gateway process, and how long a call waits for one when all are busy
    # before it is answered `overloaded` (store/connection/_pool.py).
    redis_pool_size: int = Field(default=64, ge=1)
    redis_pool_timeout: float = Field(default=5.0, gt=0)
    # How long one store operation (a write, a read, a batch of an import) may wait for
    # Redis before it is answered `unavailable` (store/connection/_redis_errors.py).
    redis_timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    # A write is acknowledged once this many replicas have it (WAIT after EXEC, at most
    # wait_replicas_timeout_ms); past the timeout the call answers `unconfirmed`.
    wait_replicas: int = Field(default=0, ge=0)
    wait_replicas_timeout_ms: int = Field(default=1000, ge=1)
    # Past versions kept per note (0: no history) and their maximum age in seconds (0: no
    # age bound); store/notes/_history.py.
    # At most the store's MAX_HISTORY_VERSIONS (tests/test_history.py holds them equal; the
    # settings do not import the store).
    history_versions: int = Field(default=50, ge=0, le=1000)
    history_max_age_seconds: int = Field(default=30 * 24 * 3600, ge=0)
    # How many of a workspace's latest writes a search looks among first (0: the whole board
    # every time); store/search/_search.py.
    search_window: int = Field(default=20_000, ge=0, le=100_000_000)

    # Auth
    jwt_secret: SecretStr | None = None
    # A mounted secret file wins over the variable, so the value need not sit in the environment.
    jwt_secret_file: Path | None = None
    jwt_private_key_file: Path | None = None
    jwt_public_keys_dir: Path | None = None
    jwt_issuer: str = "blackboard-mcp"
    jwt_audience: str = "blackboard-mcp"
    jwt_leeway_seconds: int = 30
    # The longest lifetime (exp - iat) of a token, in seconds: longer ones are neither issued
    # nor accepted. A revocation by token id or by subject is kept this long.
    max_token_ttl: int = Field(default=90 * 86400, gt=0)
    secrets_dir: Path | None = None

    # OAuth 2.1 resource server (auth/_external.py, gateway/_oauth_metadata.py). The externally
    # visible base URL: the resource identifier is <public_url>/mcp, the audience external
    # tokens must carry. Required once an external issuer is set, so that no Host header
    # can choose which audience this board accepts.
    public_url: str | None = None
    # Issuers whose tokens are accepted besides the board's own, by exact `iss`; one, or
    # several separated by commas or spaces (or a JSON list).
    oauth_issuer: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Their keys; unset, each issuer's own metadata names its jwks_uri.
    oauth_jwks_url: str | None = None
    # Audiences accepted besides the resource identifier, e.g. the client id that
    # Entra ID puts in the `aud` of its v2 access tokens.
    oauth_audience: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # The claim that names the agent (its subject in grants, audit and revocation): `sub`,
    # or e.g. `oid` for Entra ID, whose `sub` may start with `-` or `_`.
    oauth_subject_claim: str = Field(default="sub", min_length=1)
    # What the metadata document advertises, so a client knows what to ask the IdP for; each
    # one a scope this board accepts (checked where the settings are read, _composition.py).
    oauth_scopes_supported: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["bb:read:*", "bb:write:*"]
    )
    # A key or metadata fetch gets this long; a verification waits no longer for keys.
    oauth_fetch_timeout_seconds: float = Field(default=5.0, gt=0)
    # Keys are fetched again after this long, or sooner for a token with an unknown kid,
    # but never twice within oauth_refetch_seconds.
    oauth_jwks_cache_seconds: int = Field(default=300, ge=1)
    oauth_refetch_seconds: float = Field(default=30.0, ge=0)

    # Gateway
    host: str = "127.0.0.1"
    # 0: any free port (serve prints the one it got).
    port: int = Field(default=8765, ge=0, le=65535)
    workers: int = Field(default=1, ge=1)
    max_request_bytes: int = 2 * 1024 * 1024
    rate_limit_per_minute: int = 6000
    # The HTTP server's own limits (_uvicorn_adapter.py), per worker process: a request's
    # headers must arrive within header_timeout_seconds of the connection (or of the next
    # request's first byte), its body within body_timeout_seconds after them; an idle
    # kept-alive connection is closed after keep_alive_seconds; connections past
    # max_connections are refused with 503 as they arrive.
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    keep_alive_seconds: int = Field(default=5, ge=1)
    max_header_bytes: int = Field(default=64 * 1024, ge=1024)
    max_connections: int = Field(default=1024, ge=1)
    # Tool calls one gateway process handles at once; past it a call is answered
    # `overloaded` at once rather than queued behind the others.
    max_in_flight: int = Field(default=1024, ge=1)
    # Plain tools/call requests skip the SDK's per-request machinery (gateway/_direct.py);
    # false sends every request through the SDK, e.g. to get its OpenTelemetry spans.
    direct_tool_calls: bool = True
    # subscriptions/listen streams one token may hold open on one gateway process, and the
    # changes a stream may fall behind before it is dropped as too slow (gateway/listening/_hub.py).
    listeners_per_token: int = Field(default=8, ge=1)
    listener_queue: int = Field(default=1024, ge=1)
    # Under a burst of changes, the writes per second this process makes to its streams in
    # all: the change log is read at most every listeners / listener_writes_per_second
    # seconds (never more than 75 ms apart), and each stream sends what a read brought in
    # one write.
    listener_writes_per_second: int = Field(default=500, ge=20)
    allowed_hosts: list[str] = Field(default_factory=list)
    # Proxies whose X-Forwarded-For/-Proto are believed (uvicorn's forwarded_allow_ips: a
    # comma-separated list of addresses or networks, "*" for any); empty believes none, so a
    # local client cannot rewrite the scheme of the URLs the board derives from a request.
    forwarded_allow_ips: str | None = None
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"

    @field_validator("oauth_issuer", "oauth_audience", "oauth_scopes_supported", mode="before")
    @classmethod
    def _word_list(cls, value: object) -> object:
        """A JSON list, or words separated by commas or whitespace."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part for part in text.replace(",", " ").split() if part]
        return value

    @field_validator("jwt_secret")
    @classmethod
    def _long_enough_secret(cls, value: SecretStr | None) -> SecretStr | None:
        # HS256 wants a key at least as long as its hash (RFC 7518, 3.2): a short one can be
        # guessed offline from any token it signed.
        if value is not None and len(value.get_secret_value().encode()) < MIN_HS_SECRET_BYTES:
            raise ValueError(
                f"an HS256 secret needs at least {MIN_HS_SECRET_BYTES} bytes; generate one "
                "with `python -c 'import secrets; print(secrets.token_urlsafe(48))'`"
            )
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise ValueError("must be an absolute http(s) URL such as https://board.example.com")
        if parts.query or parts.fragment or "@" in parts.netloc:
            raise ValueError("must have no query, fragment or user part")
        return value.strip().rstrip("/")

    @field_validator("oauth_issuer")
    @classmethod
    def _issuers_need_public_url(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if value and not info.data.get("public_url"):
            raise ValueError(
                "BB_PUBLIC_URL is required with an external issuer: it fixes the audience "
                "(<BB_PUBLIC_URL>/mcp) that external tokens must carry"
            )
        for issuer in value:
            if urlsplit(issuer).scheme not in ("https", "http"):
                raise ValueError(f"issuer {issuer!r} is not an http(s) URL")
        if info.data.get("jwt_issuer") in value:
            raise ValueError("an external issuer cannot be the board's own (BB_JWT_ISSUER)")
        return value
