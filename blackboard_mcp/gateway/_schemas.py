"""What ``tools/list`` sends: five tools, described tersely.

Every word here is re-sent to the model on every turn of every agent, so the whole surface
is held at 520 tokens, under a hard ceiling of 600 (tests/test_tool_surface.py counts it as
received, in every protocol version). Argument names follow the tool contract exactly.
"""

from __future__ import annotations

import typing
from typing import Any

from mcp.types import Tool, ToolAnnotations

from blackboard_mcp.auth import ContractError, load_board_contract
from blackboard_mcp.store import REQUESTS

# Hints a client may use to decide what needs the user's confirmation. No tool reaches beyond
# the board. update_state replaces a note's content, and its past versions are kept only
# within the board's bounds (destructive), and a repeat writes again (append extends twice;
# without expect_version a new version): not idempotent. link_state adds links or, with
# ``remove``, takes them away (destructive), and repeating either changes nothing more
# (idempotent). What equals the protocol's default is left out (readOnlyHint false, and
# destructiveHint true, idempotentHint false): the surface's budget is tight.
_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(open_world_hint=False)
_LINK = ToolAnnotations(idempotent_hint=True, open_world_hint=False)


_CONTRACT = load_board_contract()
_WIRE_TYPES: dict[str, dict[str, Any]] = {
    "Text": {"type": "string"},
    "Int": {"type": "integer"},
    "Float": {"type": "number"},
    "Bool": {"type": "boolean"},
}


def _wire_type(tb_type: str) -> dict[str, Any]:
    if tb_type == "List of Json":
        # A table's rows: each a list of cells. Cells are said to be text, the one cell type
        # every provider's function calling takes; numbers, booleans and null are taken too.
        return {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}
    if tb_type.startswith("List of "):
        return {"type": "array", "items": _wire_type(tb_type.removeprefix("List of "))}
    return dict(_WIRE_TYPES[tb_type])


def _choices(annotation: Any) -> tuple[Any, ...]:
    """The values of a ``Literal`` field (``X | None`` unwrapped), or none."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    for member in typing.get_args(annotation):
        if typing.get_origin(member) is typing.Literal:
            return typing.get_args(member)
    return ()


def _input_schema(tool: str) -> dict[str, Any]:
    """The arguments, their wire types and which are required from the tool's request type in
    contracts/board.tb; the choices from the request class the store takes.

    Defaults are not sent: at about 4 tokens each they do not pay for themselves on every
    turn, and an argument left out gets the contract's default all the same (README)."""
    requirements = _CONTRACT.by_mcp_name(tool)
    if requirements is None:
        raise ContractError(f"{tool} has no contract")
    request = REQUESTS[tool]
    hints = typing.get_type_hints(request)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, tb_type in _CONTRACT.types[requirements.input_type].items():
        if not tb_type.startswith("Optional "):
            required.append(name)
        choices = _choices(hints.get(name))
        wire = _wire_type(tb_type.removeprefix("Optional "))
        # An enum keeps its type: Gemini's function declarations refuse one without.
        schema: dict[str, Any] = {**wire, "enum": list(choices)} if choices else wire
        properties[name] = schema
    object_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        object_schema["required"] = required
    return object_schema


# One short phrase for each argument whose name and schema do not say it all; every other
# argument is its name (body, append, columns, rows of cells, uris, limit, budget_tokens, ...).
# The rest of what an agent needs comes in the answers themselves: a cut item names its rest,
# a listing its next page (``after``), a missing catch-up note what it is for.
TOOLS: tuple[Tool, ...] = (
    Tool(
        name="update_state",
        description="digest: summary. source_path: server file. expect_version: read or 0.",
        input_schema=_input_schema("update_state"),
        annotations=_WRITE,
    ),
    Tool(
        name="get_state",
        # A placeholder, never a name: ``bb://ws/...`` here was called as written, in a
        # workspace that was not the token's (no workspace name starts with ``<``).
        description="@N: version. Start: bb://<workspace>/run/state/current.",
        input_schema=_input_schema("get_state"),
        annotations=_READ,
    ),
    Tool(
        name="list_keys",
        description="topic or note (versions). cursor: changes since.",
        input_schema=_input_schema("list_keys"),
        annotations=_READ,
    ),
    Tool(
        name="search_keys",
        # A query as typed; its commas paid for ``<workspace>`` above.
        description='Words pre* -not "phrase"',
        input_schema=_input_schema("search_keys"),
        annotations=_READ,
    ),
    Tool(
        name="link_state",
        description="Link notes.",
        input_schema=_input_schema("link_state"),
        annotations=_LINK,
    ),
)

TOOL_NAMES = tuple(t.name for t in TOOLS)
INPUT_SCHEMAS: dict[str, dict[str, Any]] = {t.name: t.input_schema for t in TOOLS}
# The schemas that declare an ``x-mcp-header`` (an argument mirrored in an ``Mcp-Param-*``
# HTTP header, which the SDK checks on 2026-07-28 calls). None does today, so the SDK has
# nothing to check and is spared walking each schema on every call.
HEADER_SCHEMAS: dict[str, dict[str, Any]] = {
    name: schema for name, schema in INPUT_SCHEMAS.items() if "x-mcp-header" in repr(schema)
}
ARGUMENTS: dict[str, frozenset[str]] = {
    t.name: frozenset(t.input_schema["properties"]) for t in TOOLS
}
