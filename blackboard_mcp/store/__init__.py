"""The board's store: notes, versions, links and search on Redis with RediSearch."""

from ._addresses import CATCH_UP_PATH, Address, catch_up_address, is_valid_name, parse_address
from ._admission import Admission, RedisCallAdmission
from ._audit_log import RedisAuditLog
from ._board import Board, BoardLimits
from ._embedded import (
    EmbeddedBinaries,
    EmbeddedRedis,
    find_binaries,
    free_port,
    make_private_dir,
    write_private,
)
from ._errors import (
    Conflict,
    Contended,
    EmbeddedRedisError,
    InvalidArgument,
    NotFound,
    Overloaded,
    StoreError,
    TooLarge,
    Unavailable,
    Unconfirmed,
)
from ._links import RELATIONS
from ._location import client_location, failure_reason, redacted_url
from ._placement import ClusterMode, NodeReport, open_client
from ._processes import set_parent_death_signal
from ._ratelimit import RedisRateLimiter
from ._revocations import RedisRevocationList
from ._tokencount import TiktokenCounter, TokenCounter
from ._views import Readable, every_topic

__all__ = [
    "CATCH_UP_PATH",
    "RELATIONS",
    "Address",
    "Admission",
    "Board",
    "BoardLimits",
    "ClusterMode",
    "Conflict",
    "Contended",
    "EmbeddedBinaries",
    "EmbeddedRedis",
    "EmbeddedRedisError",
    "InvalidArgument",
    "NodeReport",
    "NotFound",
    "Overloaded",
    "Readable",
    "RedisAuditLog",
    "RedisCallAdmission",
    "RedisRateLimiter",
    "RedisRevocationList",
    "StoreError",
    "TiktokenCounter",
    "TokenCounter",
    "TooLarge",
    "Unavailable",
    "Unconfirmed",
    "catch_up_address",
    "client_location",
    "every_topic",
    "failure_reason",
    "find_binaries",
    "free_port",
    "is_valid_name",
    "make_private_dir",
    "open_client",
    "parse_address",
    "redacted_url",
    "set_parent_death_signal",
    "write_private",
]
