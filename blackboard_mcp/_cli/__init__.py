"""What the ``blackboard-mcp`` commands share: their failures, Redis, keys and probes."""

from ._errors import CliError, ConfigurationError, RedisUnreachable, run_command
from ._health import probe_gateway
from ._keys import DEFAULT_SECRET_FILE, with_signing_key
from ._redis import (
    EMBEDDED_URL_FILE,
    check_redis_reachable,
    checked_redis_url,
    redis_failures,
    redis_url,
    require_embedded_binaries,
)

__all__ = [
    "DEFAULT_SECRET_FILE",
    "EMBEDDED_URL_FILE",
    "CliError",
    "ConfigurationError",
    "RedisUnreachable",
    "check_redis_reachable",
    "checked_redis_url",
    "probe_gateway",
    "redis_failures",
    "redis_url",
    "require_embedded_binaries",
    "run_command",
    "with_signing_key",
]
