"""Access: per-agent tokens, topic scopes, .tb tool contracts, refusal before dispatch."""

from blackboard_mcp.audit import AuditRecord, AuditSink, BatchAuditSink, printable

from ._dispatch import Authorizer, Manifest
from ._errors import (
    AuthError,
    BadTokenRequest,
    ContractError,
    Forbidden,
    GrantExceedsIssuer,
    InvalidScope,
    KeysUnavailable,
    MissingCapability,
    MissingMemoryGrant,
    MissingSecret,
    NotAdmin,
    TokenExpired,
    TokenInvalid,
    TokenNotYetValid,
    TokenRevoked,
    TopicNotReadable,
    TopicNotWritable,
    Unauthenticated,
    UnknownKey,
    WrongWorkspace,
)
from ._external import ExternalTokens, external_tokens_from_settings
from ._grants import Grant
from ._jwks import KeySource
from ._keys import (
    SigningKey,
    VerificationKeys,
    generate_ed25519_keypair,
    generate_hs_secret_file,
    keys_from_settings,
)
from ._names import CAPABILITIES, SUBJECT_PATTERN, is_subject, is_token_id, is_workspace
from ._oauth_scopes import scope_problem
from ._revocations import NoRevocations, RevocationList, Revoker
from ._scopes import check_pattern, pattern_covers, topic_matches
from ._secrets import SecretResolver, SecretValue
from ._tb import Contract, ToolRequirements, load_board_contract, parse_contract
from ._tokens import (
    DEFAULT_MAX_TOKEN_TTL,
    TokenIssuer,
    TokenVerifier,
    issue_for_admin,
    require_admin,
)

__all__ = [
    "CAPABILITIES",
    "DEFAULT_MAX_TOKEN_TTL",
    "SUBJECT_PATTERN",
    "AuditRecord",
    "AuditSink",
    "AuthError",
    "Authorizer",
    "BadTokenRequest",
    "BatchAuditSink",
    "Contract",
    "ContractError",
    "ExternalTokens",
    "Forbidden",
    "Grant",
    "GrantExceedsIssuer",
    "InvalidScope",
    "KeySource",
    "KeysUnavailable",
    "Manifest",
    "MissingCapability",
    "MissingMemoryGrant",
    "MissingSecret",
    "NoRevocations",
    "NotAdmin",
    "RevocationList",
    "Revoker",
    "SecretResolver",
    "SecretValue",
    "SigningKey",
    "TokenExpired",
    "TokenInvalid",
    "TokenIssuer",
    "TokenNotYetValid",
    "TokenRevoked",
    "TokenVerifier",
    "ToolRequirements",
    "TopicNotReadable",
    "TopicNotWritable",
    "Unauthenticated",
    "UnknownKey",
    "VerificationKeys",
    "WrongWorkspace",
    "check_pattern",
    "external_tokens_from_settings",
    "generate_ed25519_keypair",
    "generate_hs_secret_file",
    "is_subject",
    "is_token_id",
    "is_workspace",
    "issue_for_admin",
    "keys_from_settings",
    "load_board_contract",
    "parse_contract",
    "pattern_covers",
    "printable",
    "require_admin",
    "scope_problem",
    "topic_matches",
]
