"""The ``blackboard-mcp`` commands, one module each (serve, health, token, audit, delete,
restore, retention, export and import), and what they share: their failures, Redis, keys."""

from ._audit import add_audit_commands, iso
from ._delete import add_delete_command
from ._durations import FORMAT as DURATION_FORMAT
from ._durations import parse_duration
from ._errors import CliError, ConfigurationError, RedisUnreachable, run_command
from ._health import add_health_command, probe_gateway
from ._key_files import DEFAULT_SECRET_FILE, with_signing_key
from ._redis import (
    EMBEDDED_URL_FILE,
    check_redis_reachable,
    checked_redis_url,
    redis_failures,
    redis_url,
    require_embedded_binaries,
)
from ._restore import add_restore_command
from ._retention import add_retention_commands
from ._serve import add_serve_command
from ._tokens import add_token_commands
from ._transfer import add_transfer_commands

__all__ = [
    "DEFAULT_SECRET_FILE",
    "DURATION_FORMAT",
    "EMBEDDED_URL_FILE",
    "CliError",
    "ConfigurationError",
    "RedisUnreachable",
    "add_audit_commands",
    "add_delete_command",
    "add_health_command",
    "add_restore_command",
    "add_retention_commands",
    "add_serve_command",
    "add_token_commands",
    "add_transfer_commands",
    "check_redis_reachable",
    "checked_redis_url",
    "iso",
    "parse_duration",
    "probe_gateway",
    "redis_failures",
    "redis_url",
    "require_embedded_binaries",
    "run_command",
    "with_signing_key",
]
