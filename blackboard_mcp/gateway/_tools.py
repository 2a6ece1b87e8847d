"""The five tools: one spec each, from which every table of tools is derived.

A spec names the tool, the request class its arguments are parsed into (once, before
authorisation), its handler (typed on that class), whether its admission rides its first
round trip to Redis, how ``tools/list`` presents it, and its requirements from
contracts/board.tb. The request names the addresses it reads and writes, so ``scope_of`` can
tell which topics a call touches and refuse it before any store code runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from mcp.types import ToolAnnotations

from blackboard_mcp.auth import (
    ContractError,
    Grant,
    Manifest,
    ToolRequirements,
    load_board_contract,
)
from blackboard_mcp.store import (
    Board,
    Gate,
    GetState,
    LinkState,
    ListKeys,
    Readable,
    SearchKeys,
    ToolRequest,
    UpdateState,
    every_topic,
)


@dataclass(frozen=True)
class CallScope:
    """The workspace and topics one call reads and writes, and every address it names."""

    workspace: str
    read_topics: frozenset[str] = field(default_factory=frozenset)
    write_topics: frozenset[str] = field(default_factory=frozenset)
    addresses: tuple[str, ...] = ()
    # get_state's addresses in topics the token may not read: refused item by item, by the
    # store, rather than the whole call (the rest of the batch is read).
    refused: tuple[str, ...] = ()
    # The call's first address in another workspace, moved into the token's: the address
    # the caller meant, which its refusal names (an agent guesses a workspace, never a token).
    corrected: str | None = None
    # It reads the catch-up note and nothing else: no read topic needed.
    reads_catch_up_only: bool = False


def scope_of(request: ToolRequest, grant: Grant, *, per_item: bool = False) -> CallScope:
    """Which topics ``request`` would read and write, from its addresses and topic alone.

    ``per_item``: a get_state tool call, whose unreadable addresses are that item's refusal
    (a resource read or a listen names one note, and is refused whole)."""
    if isinstance(request, SearchKeys) or (isinstance(request, ListKeys) and not request.reads):
        topics = frozenset() if request.topic is None else frozenset([request.topic])
        return CallScope(grant.workspace, read_topics=topics)
    reads, writes = request.reads, request.writes
    everything = [*writes, *reads]
    # A call's addresses must all be in the token's workspace; the authoriser names the
    # mismatch, so report the first foreign one as the call's workspace.
    foreign = sorted(
        (a for a in everything if a.workspace != grant.workspace), key=lambda a: a.workspace
    )
    scoped = reads
    if isinstance(request, GetState | ListKeys):
        # The catch-up note is read by every reader of its workspace, whatever its topics
        # (README): reading it, or its versions, asks for no topic. Only a read of it: a
        # source or a link target still needs its topic, and writing it needs write on run.
        scoped = tuple(a for a in reads if not a.is_catch_up)
    refused: tuple[str, ...] = ()
    if per_item and isinstance(request, GetState) and not foreign:
        # Asked once a topic: a read of many notes names few topics.
        readable = {topic: grant.can_read(topic) for topic in {a.topic for a in scoped}}
        refused = tuple(a.uri for a in scoped if not readable[a.topic])
        scoped = tuple(a for a in scoped if readable[a.topic])
    return CallScope(
        workspace=foreign[0].workspace if foreign else grant.workspace,
        read_topics=frozenset(a.topic for a in scoped),
        write_topics=frozenset(a.topic for a in writes),
        addresses=tuple(a.uri for a in everything),
        refused=refused,
        corrected=replace(foreign[0], workspace=grant.workspace).uri if foreign else None,
        reads_catch_up_only=bool(reads) and not scoped and not refused,
    )


def _readable(grant: Grant) -> Readable:
    # The store recognises this very predicate and searches without a topic filter.
    return every_topic if grant.reads_every_topic else grant.can_read


Body = Mapping[str, Any]
# A tool's request class: the spec of each tool is checked on its own class.
R = TypeVar("R", UpdateState, GetState, ListKeys, SearchKeys, LinkState)
Handler = Callable[[Board, Grant, R], Awaitable[Body]]
GatedHandler = Callable[[Board, Grant, R, Gate], Awaitable[Body]]


# Every tool takes the call's admission (revocation and rate limit) as a gate that rides its
# first round trip to Redis (store/connection/_tx.py, ``BoardClient.admitted``), judged before
# anything is written or anything read is used; ToolCaller passes it.
async def update_state(board: Board, grant: Grant, request: UpdateState, gate: Gate) -> Body:
    return await board.update_state(
        request, author=grant.subject, readable=grant.can_read, gate=gate
    )


async def get_state(board: Board, grant: Grant, request: GetState, gate: Gate) -> Body:
    return await board.get_state(request, readable=grant.can_read, gate=gate)


async def list_keys(board: Board, grant: Grant, request: ListKeys, gate: Gate) -> Body:
    return await board.list_keys(
        request, workspace=grant.workspace, readable=grant.can_read, gate=gate
    )


async def search_keys(board: Board, grant: Grant, request: SearchKeys, gate: Gate) -> Body:
    return await board.search_keys(
        request, workspace=grant.workspace, readable=_readable(grant), gate=gate
    )


async def link_state(board: Board, grant: Grant, request: LinkState, gate: Gate) -> Body:
    return await board.link_state(request, author=grant.subject, readable=grant.can_read, gate=gate)


class ToolCall(Protocol):
    """One call's checked request, and how to run it."""

    @property
    def request(self) -> ToolRequest: ...

    async def run(self, board: Board, grant: Grant, gate: Gate | None) -> Body: ...


class AnyToolSpec(Protocol):
    """A tool's spec, whatever its request class: what the caller, the schemas and the page
    use."""

    @property
    def name(self) -> str: ...
    @property
    def request(self) -> type[ToolRequest]: ...
    @property
    def requirements(self) -> ToolRequirements: ...
    @property
    def gated(self) -> bool: ...
    @property
    def description(self) -> str: ...
    @property
    def annotations(self) -> ToolAnnotations: ...

    def parse(self, args: Mapping[str, Any]) -> ToolCall: ...


@dataclass(frozen=True)
class _Parsed(Generic[R]):
    spec: ToolSpec[R]
    request: R

    async def run(self, board: Board, grant: Grant, gate: Gate | None) -> Body:
        if self.spec.gated_handler is not None:
            if gate is None:
                raise ContractError(f"{self.spec.name} runs only with its admission's gate")
            return await self.spec.gated_handler(board, grant, self.request, gate)
        assert self.spec.handler is not None  # one of the two, by construction
        return await self.spec.handler(board, grant, self.request)


BOARD_CONTRACT = load_board_contract()


@dataclass(frozen=True)
class ToolSpec(Generic[R]):
    """One tool. Exactly one of ``handler`` and ``gated_handler``: a gated tool is admitted
    in its handler's first round trip, the gate it is given; any other before it runs."""

    name: str
    request: type[R]
    description: str
    annotations: ToolAnnotations
    handler: Handler[R] | None = None
    gated_handler: GatedHandler[R] | None = None
    requirements: ToolRequirements = field(init=False)

    def __post_init__(self) -> None:
        if (self.handler is None) == (self.gated_handler is None):
            raise ContractError(f"{self.name} needs exactly one handler")
        requirements = BOARD_CONTRACT.by_mcp_name(self.name)
        if requirements is None:
            raise ContractError(f"{self.name} has no contract; declare it in the .tb file first")
        object.__setattr__(self, "requirements", requirements)

    @property
    def gated(self) -> bool:
        return self.gated_handler is not None

    def parse(self, args: Mapping[str, Any]) -> _Parsed[R]:
        """``args`` checked into the tool's request; a null is left out."""
        return _Parsed(self, self.request.parse(args))


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

# The five tools, in the order tools/list sends them. A description is one short phrase for
# each argument whose name and schema do not say it all; every other argument is its name
# (body, append, columns, rows of cells, uris, limit, budget_tokens, ...). The rest of what
# an agent needs comes in the answers themselves: a cut item names its rest, a listing its
# next page (``after``), a missing catch-up note what it is for.
TOOL_SPECS: tuple[AnyToolSpec, ...] = (
    ToolSpec(
        name="update_state",
        request=UpdateState,
        description="digest: summary. source_path: server file. expect_version: read or 0.",
        annotations=_WRITE,
        gated_handler=update_state,
    ),
    ToolSpec(
        name="get_state",
        request=GetState,
        # A placeholder, never a name: ``bb://ws/...`` here was called as written, in a
        # workspace that was not the token's (no workspace name starts with ``<``).
        description="@N: version. Start: bb://<workspace>/run/state/current.",
        annotations=_READ,
        gated_handler=get_state,
    ),
    ToolSpec(
        name="list_keys",
        request=ListKeys,
        description="topic or note (versions). cursor: changes since.",
        annotations=_READ,
        gated_handler=list_keys,
    ),
    ToolSpec(
        name="search_keys",
        request=SearchKeys,
        # A query as typed; its commas paid for ``<workspace>`` above.
        description='Words pre* -not "phrase"',
        annotations=_READ,
        gated_handler=search_keys,
    ),
    ToolSpec(
        name="link_state",
        request=LinkState,
        description="Link notes.",
        annotations=_LINK,
        gated_handler=link_state,
    ),
)
TOOLS_BY_NAME: Mapping[str, AnyToolSpec] = {spec.name: spec for spec in TOOL_SPECS}
# What the board page may call besides withdrawing a link.
READ_TOOLS = frozenset(spec.name for spec in TOOL_SPECS if spec.annotations.read_only_hint)


def bound_manifest() -> Manifest[AnyToolSpec]:
    """The contract with every tool bound to its spec: no tool without both."""
    manifest: Manifest[AnyToolSpec] = Manifest(BOARD_CONTRACT)
    for spec in TOOL_SPECS:
        manifest.bind(spec.name, spec)
    manifest.require_complete()
    return manifest
