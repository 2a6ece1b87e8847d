"""What ``tools/list`` sends: the five tools of gateway/_tools.py, described tersely.

Every word here is re-sent to the model on every turn of every agent, so the whole surface
is held at 520 tokens, under a hard ceiling of 600 (tests/test_tool_surface.py counts it as
received, in every protocol version). Argument names follow the tool contract exactly.
"""

from __future__ import annotations

import typing
from typing import Any

from mcp.types import Tool

from ._tools import BOARD_CONTRACT, TOOL_SPECS, AnyToolSpec

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


def _input_schema(spec: AnyToolSpec) -> dict[str, Any]:
    """The arguments, their wire types and which are required from the tool's request type in
    contracts/board.tb; the choices from the request class the store takes.

    Defaults are not sent: at about 4 tokens each they do not pay for themselves on every
    turn, and an argument left out gets the contract's default all the same (README)."""
    requirements = spec.requirements
    hints = typing.get_type_hints(spec.request)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, tb_type in BOARD_CONTRACT.types[requirements.input_type].items():
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


TOOLS: tuple[Tool, ...] = tuple(
    Tool(
        name=spec.name,
        description=spec.description,
        input_schema=_input_schema(spec),
        annotations=spec.annotations,
    )
    for spec in TOOL_SPECS
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
