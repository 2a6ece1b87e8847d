"""A parser for the subset of the ``.tb`` contract language the board uses.

Grammar (indentation marks a block's clauses)::

    module a.b
    memory Name
    type Name
        field is Type            # Text, Int, Float, Bool, List of X, Optional X, or a type
    tool Name
        takes arg as Type
        gives Type
        requires cap, cap
        requires cap when argument   # needed only when the call gives that argument
        secrets HANDLE, HANDLE
        uses memory Name read|write
    endpoint name/part           # a way in that is not a tool (a resource, a listen, a page's API)
        requires cap, cap
        uses memory Name read|write

An endpoint takes and gives no contract type: what it reads is the board's, through its own
path. It states what a token needs for it to run, and the audit names it as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from importlib import resources
from typing import TypedDict

from ._errors import ContractError

_BUILTINS = {"Text", "Int", "Float", "Bool", "Json"}
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# An endpoint's name: lower-case words joined by slashes ("resources/read", "board/topics").
_ENDPOINT = r"[a-z][a-z_]*(?:/[a-z][a-z_]*)+"


@dataclass(frozen=True, kw_only=True)
class Requirements:
    """What a token must hold for one way into the board to run, as the contract states it."""

    name: str
    capabilities: frozenset[str]
    conditional_capabilities: Mapping[str, frozenset[str]]  # argument -> capabilities
    secrets: frozenset[str]
    memory_reads: frozenset[str]
    memory_writes: frozenset[str]

    @property
    def audit_name(self) -> str:
        """The name its refusals, its audit records and its metrics give it."""
        return self.name

    def capabilities_for(self, arguments_present: AbstractSet[str]) -> frozenset[str]:
        extra = [
            caps for arg, caps in self.conditional_capabilities.items() if arg in arguments_present
        ]
        return self.capabilities.union(*extra)


@dataclass(frozen=True, kw_only=True)
class ToolRequirements(Requirements):
    input_type: str
    output_type: str

    @property
    def mcp_name(self) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.name).lower()

    @property
    def audit_name(self) -> str:
        return self.mcp_name


@dataclass(frozen=True)
class Contract:
    module: str
    types: Mapping[str, Mapping[str, str]]
    memories: frozenset[str]
    tools: Mapping[str, ToolRequirements]
    # By name as written, which is also the MCP method or the page's path it stands for.
    endpoints: Mapping[str, Requirements] = field(default_factory=dict)

    def by_mcp_name(self, name: str) -> ToolRequirements | None:
        for tool in self.tools.values():
            if tool.mcp_name == name:
                return tool
        return None


@dataclass
class _ToolDraft:
    line: int
    takes: str | None = None
    gives: str | None = None
    caps: set[str] = field(default_factory=set)
    conditional: dict[str, set[str]] = field(default_factory=dict)
    secrets: set[str] = field(default_factory=set)
    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)


def _names(text: str, where: str) -> set[str]:
    names = {n.strip() for n in text.split(",")}
    if not names or any(not re.fullmatch(_IDENT, n) for n in names):
        raise ContractError(f"{where}: expected a comma-separated list of names")
    return names


def parse_contract(text: str, filename: str = "<contract>") -> Contract:
    module = ""
    types: dict[str, dict[str, str]] = {}
    memories: set[str] = set()
    drafts: dict[str, _ToolDraft] = {}
    endpoint_drafts: dict[str, _ToolDraft] = {}
    block: tuple[str, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        where = f"{filename}:{number}"
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indented = line[0] in " \t"
        words = line.split()
        if not indented:
            block = None
            head = words[0]
            if head == "module" and len(words) == 2:
                module = words[1]
            elif head == "memory" and len(words) == 2 and re.fullmatch(_IDENT, words[1]):
                memories.add(words[1])
            elif head == "type" and len(words) == 2 and re.fullmatch(_IDENT, words[1]):
                types[words[1]] = {}
                block = ("type", words[1])
            elif head == "tool" and len(words) == 2 and re.fullmatch(_IDENT, words[1]):
                if words[1] in drafts:
                    raise ContractError(f"{where}: tool {words[1]} is declared twice")
                drafts[words[1]] = _ToolDraft(number)
                block = ("tool", words[1])
            elif head == "endpoint" and len(words) == 2 and re.fullmatch(_ENDPOINT, words[1]):
                if words[1] in endpoint_drafts:
                    raise ContractError(f"{where}: endpoint {words[1]} is declared twice")
                endpoint_drafts[words[1]] = _ToolDraft(number)
                block = ("endpoint", words[1])
            else:
                raise ContractError(f"{where}: expected module, memory, type, tool or endpoint")
            continue
        if block is None:
            raise ContractError(f"{where}: an indented clause outside a type or tool")
        kind, name = block
        if kind == "type":
            match = re.fullmatch(rf"\s+({_IDENT})\s+is\s+(.+)", line)
            if not match:
                raise ContractError(f"{where}: expected `field is Type`")
            types[name][match.group(1)] = match.group(2).strip()
            continue
        draft = drafts[name] if kind == "tool" else endpoint_drafts[name]
        clause = words[0]
        rest = line.strip()[len(clause) :].strip()
        if kind == "endpoint" and clause not in ("requires", "uses"):
            # What an endpoint takes and gives is its protocol's, not the contract's.
            raise ContractError(f"{where}: unknown clause {clause!r} in endpoint {name}")
        if clause == "takes":
            match = re.fullmatch(rf"({_IDENT})\s+as\s+({_IDENT})", rest)
            if not match:
                raise ContractError(f"{where}: expected `takes name as Type`")
            draft.takes = match.group(2)
        elif clause == "gives" and re.fullmatch(_IDENT, rest):
            draft.gives = rest
        elif clause == "requires":
            if " when " in rest:
                caps, argument = rest.split(" when ", 1)
                draft.conditional.setdefault(argument.strip(), set()).update(_names(caps, where))
            else:
                draft.caps |= _names(rest, where)
        elif clause == "secrets":
            draft.secrets |= _names(rest, where)
        elif clause == "uses":
            match = re.fullmatch(rf"memory\s+({_IDENT})\s+(read|write)", rest)
            if not match:
                raise ContractError(f"{where}: expected `uses memory Name read|write`")
            (draft.reads if match.group(2) == "read" else draft.writes).add(match.group(1))
        else:
            raise ContractError(f"{where}: unknown clause {clause!r} in {kind} {name}")
    known = set(types) | _BUILTINS
    for type_name, fields in types.items():
        for field_name, field_type in fields.items():
            base = field_type.removeprefix("Optional ").removeprefix("List of ").strip()
            if base not in known:
                raise ContractError(
                    f"{filename}: type {type_name}.{field_name} uses undefined type {base}"
                )
    tools: dict[str, ToolRequirements] = {}
    for name, draft in drafts.items():
        where = f"{filename}:{draft.line}"
        if draft.takes is None or draft.gives is None:
            raise ContractError(f"{where}: tool {name} needs both takes and gives")
        for used in (draft.takes, draft.gives):
            if used not in known:
                raise ContractError(f"{where}: tool {name} uses undefined type {used}")
        _check_memories(draft, f"{where}: tool {name}", memories)
        tools[name] = ToolRequirements(
            name=name,
            input_type=draft.takes,
            output_type=draft.gives,
            **_requirements(draft),
        )
    endpoints: dict[str, Requirements] = {}
    for name, draft in endpoint_drafts.items():
        _check_memories(draft, f"{filename}:{draft.line}: endpoint {name}", memories)
        endpoints[name] = Requirements(name=name, **_requirements(draft))
    return Contract(module, types, frozenset(memories), tools, endpoints)


def _check_memories(draft: _ToolDraft, where: str, memories: AbstractSet[str]) -> None:
    for memory in sorted(draft.reads | draft.writes):
        if memory not in memories:
            raise ContractError(f"{where} uses undefined memory {memory}")


class _RequirementFields(TypedDict):
    capabilities: frozenset[str]
    conditional_capabilities: Mapping[str, frozenset[str]]
    secrets: frozenset[str]
    memory_reads: frozenset[str]
    memory_writes: frozenset[str]


def _requirements(draft: _ToolDraft) -> _RequirementFields:
    return {
        "capabilities": frozenset(draft.caps),
        "conditional_capabilities": {k: frozenset(v) for k, v in draft.conditional.items()},
        "secrets": frozenset(draft.secrets),
        "memory_reads": frozenset(draft.reads),
        "memory_writes": frozenset(draft.writes),
    }


def load_board_contract() -> Contract:
    text = resources.files("blackboard_mcp.contracts").joinpath("board.tb").read_text()
    return parse_contract(text, "board.tb")
