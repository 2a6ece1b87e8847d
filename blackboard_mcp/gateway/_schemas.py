"""What ``tools/list`` sends: five tools, described tersely.

Every word here is re-sent to the model on every turn of every agent, so the whole surface
has a budget of 600 tokens (tests/test_tool_surface.py counts it). Argument names and
defaults follow the five-tools contract exactly.
"""

from __future__ import annotations

from typing import Any

from mcp.types import Tool, ToolAnnotations

_S: dict[str, Any] = {"type": "string"}
_URIS: dict[str, Any] = {"type": "array", "items": _S}
_INT: dict[str, Any] = {"type": "integer"}
_BUDGET: dict[str, Any] = {"type": "integer", "default": 2000}


# Hints a client may use to decide what needs the user's confirmation. No tool reaches beyond
# the board. update_state replaces a note's content and keeps no history (destructive), and a
# repeat writes again (append extends twice; without expect_version a new version): not
# idempotent. link_state only adds links, and re-adding one changes no link. The writes leave
# out readOnlyHint: false is the protocol's default, and the surface's budget is tight.
_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(destructive_hint=True, idempotent_hint=False, open_world_hint=False)
_LINK = ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _obj(required: list[str] | None, **props: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


TOOLS: tuple[Tool, ...] = (
    Tool(
        name="update_state",
        description=(
            "Write note uri (bb://workspace/topic/key): short digest plus body, columns+rows, "
            "append or source_path (server summarises a file). expect_version: last read's "
            "(0: create only)."
        ),
        input_schema=_obj(
            ["uri", "digest"],
            uri=_S,
            digest=_S,
            body=_S,
            source_path=_S,
            columns=_URIS,
            rows={"type": "array"},
            append=_S,
            expect_version=_INT,
            sources=_URIS,
            confidence={"type": "number"},
        ),
        annotations=_WRITE,
    ),
    Tool(
        name="get_state",
        description=(
            "Batch read; digest unless mode says more; reports omissions. "
            "Catch up: bb://workspace/run/state/current."
        ),
        input_schema=_obj(
            ["uris"],
            uris=_URIS,
            mode={"enum": ["digest", "fields", "table", "full", "ref"], "default": "digest"},
            fields=_URIS,
            budget_tokens=_BUDGET,
        ),
        annotations=_READ,
    ),
    Tool(
        name="list_keys",
        description=(
            "List notes; always pass topic. 3+ rows: mode=table. cursor: changes since. "
            "More: after=next."
        ),
        input_schema=_obj(
            None,
            topic=_S,
            kind={"enum": ["text", "table", "summary"]},
            order={"enum": ["recent", "name", "version"], "default": "recent"},
            limit={"type": "integer", "default": 20},
            mode={"enum": ["digest", "table", "ref"], "default": "digest"},
            fields=_URIS,
            budget_tokens=_BUDGET,
            cursor=_INT,
            after=_S,
        ),
        annotations=_READ,
    ),
    Tool(
        name="search_keys",
        description="Search digests and contents before deriving; empty means nothing relates.",
        input_schema=_obj(["q"], q=_S, topic=_S, limit={"type": "integer", "default": 10}),
        annotations=_READ,
    ),
    Tool(
        name="link_state",
        description="Link note src to dst notes.",
        input_schema=_obj(
            ["src", "rel", "dst"],
            src=_S,
            rel={
                "enum": [
                    "depends_on",
                    "derived_from",
                    "supersedes",
                    "refines",
                    "cites",
                    "part_of",
                    "contradicts",
                ]
            },
            dst=_URIS,
        ),
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
