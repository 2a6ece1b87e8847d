"""The board's store: notes, versions, links and search on Redis with RediSearch."""

from ._addresses import (
    CATCH_UP_PATH,
    Address,
    catch_up_address,
    is_valid_name,
    parse_address,
    parse_topic_address,
    validate_workspace,
)
from ._admission import Admission, RedisCallAdmission
from ._audit_log import RedisAuditLog
from ._board import Board, BoardLimits
from ._delete import DeleteReport
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
from ._export_file import ExportFile
from ._links import RELATIONS
from ._live import Change, ChangeFeed, NoteContent
from ._location import client_location, failure_reason, redacted_url
from ._placement import ClusterMode, NodeReport, board_client, open_client
from ._processes import set_parent_death_signal
from ._ratelimit import RedisRateLimiter
from ._retention import RetentionPolicy, Swept
from ._revocations import RedisRevocationList
from ._tokencount import TiktokenCounter, TokenCounter
from ._transfer import (
    FORMAT,
    FORMAT_VERSION,
    Imported,
    ImportReport,
    check_header,
    check_record,
    export_header,
)
from ._tx import Gate
from ._views import Readable, every_topic

__all__ = [
    "CATCH_UP_PATH",
    "FORMAT",
    "FORMAT_VERSION",
    "RELATIONS",
    "Address",
    "Admission",
    "Board",
    "BoardLimits",
    "Change",
    "ChangeFeed",
    "ClusterMode",
    "Conflict",
    "Contended",
    "DeleteReport",
    "EmbeddedBinaries",
    "EmbeddedRedis",
    "EmbeddedRedisError",
    "ExportFile",
    "Gate",
    "ImportReport",
    "Imported",
    "InvalidArgument",
    "NodeReport",
    "NotFound",
    "NoteContent",
    "Overloaded",
    "Readable",
    "RedisAuditLog",
    "RedisCallAdmission",
    "RedisRateLimiter",
    "RedisRevocationList",
    "RetentionPolicy",
    "StoreError",
    "Swept",
    "TiktokenCounter",
    "TokenCounter",
    "TooLarge",
    "Unavailable",
    "Unconfirmed",
    "board_client",
    "catch_up_address",
    "check_header",
    "check_record",
    "client_location",
    "every_topic",
    "export_header",
    "failure_reason",
    "find_binaries",
    "free_port",
    "is_valid_name",
    "make_private_dir",
    "open_client",
    "parse_address",
    "parse_topic_address",
    "redacted_url",
    "set_parent_death_signal",
    "validate_workspace",
    "write_private",
]
