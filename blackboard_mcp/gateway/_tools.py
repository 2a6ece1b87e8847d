"""The five tools as thin adapters from a checked request to the board.

A call's arguments are parsed once (``store.parse_request``) before authorisation; the
request names the addresses it reads and writes, so ``scope_of`` can tell which topics a
call touches and refuse it before any store code runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from blackboard_mcp.auth import Grant
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
        refused = tuple(a.uri for a in scoped if not grant.can_read(a.topic))
        scoped = tuple(a for a in scoped if grant.can_read(a.topic))
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


Handler = Callable[[Board, Grant, Any], Awaitable[Mapping[str, Any]]]
GatedHandler = Callable[[Board, Grant, Any, Gate], Awaitable[Mapping[str, Any]]]


# The writes and get_state take the call's admission (revocation and rate limit) as a gate
# that rides their first round trip to Redis (store/connection/_tx.py), judged before anything is
# written or anything read is used; ToolCaller passes it. list_keys and search_keys are
# admitted in a round trip of their own before their handler runs.
async def update_state(
    board: Board, grant: Grant, request: UpdateState, gate: Gate | None = None
) -> Mapping[str, Any]:
    return await board.update_state(
        request, author=grant.subject, readable=grant.can_read, gate=gate
    )


async def get_state(
    board: Board, grant: Grant, request: GetState, gate: Gate | None = None
) -> Mapping[str, Any]:
    return await board.get_state(request, readable=grant.can_read, gate=gate)


async def list_keys(board: Board, grant: Grant, request: ListKeys) -> Mapping[str, Any]:
    return await board.list_keys(request, workspace=grant.workspace, readable=grant.can_read)


async def search_keys(board: Board, grant: Grant, request: SearchKeys) -> Mapping[str, Any]:
    return await board.search_keys(request, workspace=grant.workspace, readable=_readable(grant))


async def link_state(
    board: Board, grant: Grant, request: LinkState, gate: Gate | None = None
) -> Mapping[str, Any]:
    return await board.link_state(request, author=grant.subject, readable=grant.can_read, gate=gate)


HANDLERS: dict[str, Handler] = {
    "update_state": update_state,
    "get_state": get_state,
    "list_keys": list_keys,
    "search_keys": search_keys,
    "link_state": link_state,
}
GATED = frozenset({"update_state", "link_state", "get_state"})
