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
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from importlib import resources

from ._errors import ContractError

_BUILTINS = {"Text", "Int", "Float", "Bool", "Json"}
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


@dataclass(frozen=True)
class ToolRequirements:
    name: str
    input_type: str
    output_type: str
    capabilities: frozenset[str]
    conditional_capabilities: Mapping[str, frozenset[str]]  # argument -> capabilities
    secrets: frozenset[str]
    memory_reads: frozenset[str]
    memory_writes: frozenset[str]

    @property
    def mcp_name(self) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.name).lower()

    def capabilities_for(self, arguments_present: AbstractSet[str]) -> frozenset[str]:
        extra = [
            caps for arg, caps in self.conditional_capabilities.items() if arg in arguments_present
        ]
        return self.capabilities.union(*extra)


@dataclass(frozen=True)
class Contract:
    module: str
    types: Mapping[str, Mapping[str, str]]
    memories: frozenset[str]
    tools: Mapping[str, ToolRequirements]

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
            else:
                raise ContractError(f"{where}: expected module, memory, type or tool")
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
        draft = drafts[name]
        clause = words[0]
        rest = line.strip()[len(clause) :].strip()
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
            raise ContractError(f"{where}: unknown clause {clause!r} in tool {name}")
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
        for memory in draft.reads | draft.writes:
            if memory not in memories:
                raise ContractError(f"{where}: tool {name} uses undefined memory {memory}")
        tools[name] = ToolRequirements(
            name=name,
            input_type=draft.takes,
            output_type=draft.gives,
            capabilities=frozenset(draft.caps),
            conditional_capabilities={k: frozenset(v) for k, v in draft.conditional.items()},
            secrets=frozenset(draft.secrets),
            memory_reads=frozenset(draft.reads),
            memory_writes=frozenset(draft.writes),
        )
    return Contract(module, types, frozenset(memories), tools)


def load_board_contract() -> Contract:
    text = resources.files("blackboard_mcp.contracts").joinpath("board.tb").read_text()
    return parse_contract(text, "board.tb")
