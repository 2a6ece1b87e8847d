"""The admin endpoints' request bodies: parsed and validated once, by pydantic, or refused.

Strict models: a number is not a string, a float is not an int, a bool is not a number, and
an unknown field is an error rather than ignored (``expires_at`` on a revoke used to be
trusted; now it is refused, since the server decides how long a revocation lasts).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from starlette.requests import Request

from blackboard_mcp.auth import (
    MAX_TOPIC_PATTERN,
    SUBJECT_PATTERN,
    TOKEN_ID_PATTERN,
    TOPIC_PATTERN_TEXT,
    WORKSPACE_PATTERN,
)

from .._errors import GatewayError

MAX_ADMIN_BODY = 16 * 1024
JWS_PATTERN = r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$"
# Enough for any error a caller can act on, short enough that a body cannot flood a reply.
_MAX_REPORTED_ERRORS = 3


class AdminBodyTooLarge(GatewayError):
    """An admin request body over MAX_ADMIN_BODY bytes."""

    code = "too_large"
    hint = f"an admin request body is at most {MAX_ADMIN_BODY} bytes"


class InvalidTokenRequestBody(GatewayError):
    """The body of ``POST /admin/tokens`` is not a valid token request."""

    hint = (
        'send a JSON object {"sub": NAME, "workspace"?: WS, "read"?: [TOPIC], "write"?: '
        '[TOPIC], "caps"?: [CAP], "secrets"?: [HANDLE], "ttl_seconds"?: INT}'
    )


class InvalidRevokeBody(GatewayError):
    """The body of ``POST /admin/revoke`` is not a valid revocation."""

    hint = (
        'send a JSON object with exactly one of {"token": JWT} (revoked until it expires), '
        '{"id": JTI} or {"sub": NAME}, and "force": true to revoke an id or subject the board '
        "has no record of"
    )


class TokenNotRevocable(GatewayError):
    """A presented token this board did not sign, or signed with claims it does not accept."""

    code = "not_found"
    hint = (
        "send the token exactly as issued by this board, or revoke it by id "
        "(`blackboard-mcp token list` shows ids)"
    )


class TokenExpiredAlready(GatewayError):
    """A presented token whose lifetime is over: no gateway accepts it, nothing to revoke."""

    code = "conflict"
    hint = "nothing to do: an expired token is refused everywhere already"


def whole_number(value: object) -> object:
    """A JSON number with no fraction as the integer it is (JSON Schema's "integer" admits
    6617903.0); anything else is left to the strict check, which refuses it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    invalid: ClassVar[type[GatewayError]] = GatewayError


# The rules a name is held to, stated in the schema too (OpenAPI's patterns are anchored here).
Subject = Annotated[str, Field(min_length=1, max_length=128, pattern=f"^{SUBJECT_PATTERN}$")]
TopicPattern = Annotated[
    str, Field(min_length=1, max_length=MAX_TOPIC_PATTERN, pattern=f"^{TOPIC_PATTERN_TEXT}$")
]
Capability = Literal["admin", "board_read", "board_write", "file_read"]


def _needs_capability(topics: str, capability: str) -> dict[str, Any]:
    return {
        "anyOf": [
            {"properties": {topics: {"maxItems": 0}}},
            {"required": ["caps"], "properties": {"caps": {"contains": {"const": capability}}}},
        ]
    }


# What auth's check_usable refuses of a grant, stated in the schema so that a body the
# document admits is one the board issues (within the admin's own grant).
_USABLE_GRANT: dict[str, Any] = {
    "allOf": [
        _needs_capability("read", "board_read"),
        _needs_capability("write", "board_write"),
        {
            "anyOf": [
                {"required": [field], "properties": {field: {"minItems": 1}}}
                for field in ("read", "write", "caps")
            ]
        },
    ]
}


class IssueBody(_Body):
    model_config = ConfigDict(json_schema_extra=_USABLE_GRANT)
    invalid = InvalidTokenRequestBody

    sub: Subject
    workspace: str | None = Field(
        default=None, min_length=1, max_length=64, pattern=f"^{WORKSPACE_PATTERN}$"
    )
    read: list[TopicPattern] = Field(default_factory=list, max_length=64)
    write: list[TopicPattern] = Field(default_factory=list, max_length=64)
    caps: list[Capability] = Field(default_factory=list, max_length=16)
    secrets: list[str] = Field(default_factory=list, max_length=64)
    # At most BB_MAX_TOKEN_TTL: the served document states this board's (_openapi.py).
    ttl_seconds: Annotated[int, BeforeValidator(whole_number)] = Field(default=3600, gt=0)


class RevokeBody(_Body):
    invalid = InvalidRevokeBody

    # A JWS in compact form; whether this board signed it is a question of state (404).
    token: str | None = Field(default=None, min_length=5, max_length=8192, pattern=JWS_PATTERN)
    id: str | None = Field(
        default=None, min_length=1, max_length=128, pattern=f"^{TOKEN_ID_PATTERN}$"
    )
    sub: Subject | None = None
    # Revoke an id or a subject the board has no record of (ahead of any token, or one issued
    # before tokens were recorded); without it, such a revocation is refused as not found.
    force: bool = False

    @model_validator(mode="after")
    def _one_target(self) -> RevokeBody:
        if sum(v is not None for v in (self.token, self.id, self.sub)) != 1:
            raise ValueError("give exactly one of token, id or sub")
        return self


Body = TypeVar("Body", bound=_Body)


async def read_body(request: Request) -> bytes:
    """The request body, refused past MAX_ADMIN_BODY without reading the rest."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_ADMIN_BODY:
        raise AdminBodyTooLarge(f"the body is {declared} bytes; the limit is {MAX_ADMIN_BODY}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_ADMIN_BODY:
            raise AdminBodyTooLarge(f"the body is over the limit of {MAX_ADMIN_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def parse_body(request: Request, model: type[Body]) -> Body:
    """``model`` from the request's JSON body; any fault raises the model's ``invalid`` error."""
    raw = await read_body(request)
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise model.invalid(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    # Each error's place and reason, never the input: a body may carry a token.
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    parts = []
    for error in errors[:_MAX_REPORTED_ERRORS]:
        where = ".".join(str(p) for p in error["loc"])[:64] or "body"
        parts.append(f"{where}: {error['msg']}")
    if len(errors) > _MAX_REPORTED_ERRORS:
        parts.append(f"and {len(errors) - _MAX_REPORTED_ERRORS} more")
    return "; ".join(parts)
