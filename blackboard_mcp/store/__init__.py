"""The board's store: notes, versions, links and search on Redis with RediSearch.

``Board`` (``_board.py``) is its face: the five tools' operations and the operators' ones.
Its parts, one subpackage each: ``notes`` (addresses, notes, the compare-and-swap write,
appends, links), ``reads`` (get_state and list_keys under the token budget, the change
feed), ``search``, ``sources`` (server-side files), ``lifecycle`` (retention, delete,
restore, export and import), ``access`` (the Redis side of auth's checks), ``connection``
(placement, pool, the store's own connection, transactions, key names, the search index a
node needs, Redis errors mapped once) and ``embedded`` (the embedded Redis process). Only
what this module exports is for callers.
"""

from ._board import Board, BoardLimits
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
from .access._admission import Admission, RedisCallAdmission
from .access._audit_log import RedisAuditLog
from .access._inventory import RedisTokenInventory
from .access._ratelimit import RedisRateLimiter
from .access._revocations import RedisRevocationList
from .connection._board_client import BoardClient, RedisCommands, RoutedClient, board_client
from .connection._location import failure_reason, redacted_url
from .connection._nodes import NodeReport
from .connection._placement import (
    ClusterMode,
    Placement,
    SingleRedis,
    open_client,
)
from .connection._tx import Gate
from .embedded._embedded import (
    EmbeddedBinaries,
    EmbeddedRedis,
    find_binaries,
    free_port,
    make_private_dir,
    write_private,
)
from .embedded._processes import set_parent_death_signal
from .lifecycle._delete import DeleteReport
from .lifecycle._export_file import ExportFile
from .lifecycle._retention import RetentionPolicy, Swept
from .lifecycle._transfer import (
    FORMAT,
    FORMAT_VERSION,
    Imported,
    ImportLimits,
    ImportReport,
    check_header,
    check_record,
    export_header,
)
from .notes._addresses import (
    CATCH_UP_PATH,
    NAME_PATTERN,
    NOTE_ADDRESS_PATTERN,
    Address,
    catch_up_address,
    is_valid_name,
    parse_address,
    parse_topic_address,
    validate_workspace,
)
from .notes._history import MAX_HISTORY_VERSIONS
from .notes._links import RELATIONS
from .notes._tokencount import TiktokenCounter, TokenCounter
from .reads._live import Change, ChangeFeed, NoteContent
from .reads._views import Readable, every_topic
from .requests import (
    GetState,
    LinkState,
    ListKeys,
    SearchKeys,
    ToolRequest,
    UpdateState,
)

__all__ = [
    "CATCH_UP_PATH",
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_HISTORY_VERSIONS",
    "NAME_PATTERN",
    "NOTE_ADDRESS_PATTERN",
    "RELATIONS",
    "Address",
    "Admission",
    "Board",
    "BoardClient",
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
    "GetState",
    "ImportLimits",
    "ImportReport",
    "Imported",
    "InvalidArgument",
    "LinkState",
    "ListKeys",
    "NodeReport",
    "NotFound",
    "NoteContent",
    "Overloaded",
    "Placement",
    "Readable",
    "RedisAuditLog",
    "RedisCallAdmission",
    "RedisCommands",
    "RedisRateLimiter",
    "RedisRevocationList",
    "RedisTokenInventory",
    "RetentionPolicy",
    "RoutedClient",
    "SearchKeys",
    "SingleRedis",
    "StoreError",
    "Swept",
    "TiktokenCounter",
    "TokenCounter",
    "TooLarge",
    "ToolRequest",
    "Unavailable",
    "Unconfirmed",
    "UpdateState",
    "board_client",
    "catch_up_address",
    "check_header",
    "check_record",
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
