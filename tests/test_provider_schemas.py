"""The five tools' input schemas are ones every model provider's function calling takes.

Rules from the providers' documentation of function (tool) schemas:
- OpenAI: an array schema must have ``items`` ("array schema missing items" otherwise); the
  top level is an object.
- Gemini / Vertex AI function declarations: a subset of OpenAPI 3.0; every schema names one
  ``type`` (a string, not a list), an enum too; no ``oneOf``/``allOf``/``not``/``$ref``.
- Anthropic: ``input_schema`` is a JSON Schema object with ``type: object``.
Checked on the schemas the gateway serves (gateway/_schemas.py), and on tools/list itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from blackboard_mcp.gateway import TOOLS

_REFUSED_KEYWORDS = {"oneOf", "allOf", "not", "$ref", "$defs", "patternProperties"}


def _faults(schema: dict[str, Any], where: str) -> list[str]:
    faults: list[str] = []
    kind = schema.get("type")
    if not isinstance(kind, str):
        faults.append(f"{where}: no single type")
    for keyword in _REFUSED_KEYWORDS & set(schema):
        faults.append(f"{where}: {keyword}")
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            faults.append(f"{where}: array without items")
        else:
            faults += _faults(items, f"{where}[]")
    if "enum" in schema and not all(isinstance(v, str) for v in schema["enum"]):
        faults.append(f"{where}: enum of non-strings")
    if kind == "object":
        for name, sub in schema.get("properties", {}).items():
            faults += _faults(sub, f"{where}.{name}")
    return faults


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_every_tool_schema_is_one_every_provider_takes(tool: Any) -> None:
    schema = tool.input_schema
    assert schema["type"] == "object"
    assert _faults(schema, tool.name) == []


def test_the_rule_set_finds_what_providers_refuse() -> None:
    assert _faults({"type": "array", "items": {"type": "array"}}, "rows") == [
        "rows[]: array without items"
    ]
    assert _faults({"enum": ["a", "b"]}, "mode") == ["mode: no single type"]
    assert _faults({"type": ["string", "null"]}, "x") == ["x: no single type"]
