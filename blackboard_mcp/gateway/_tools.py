"""The five tools as thin adapters: name the addresses a call touches, then call the board.

``scope_of`` runs before authorisation and the handler, so a call is refused for a topic it
may not touch before any store code runs. Argument values are validated by the store; this
module only needs to find the addresses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from blackboard_mcp.auth import Grant
from blackboard_mcp.store import (
    Board,
    Gate,
    InvalidArgument,
    Readable,
    every_topic,
    is_valid_name,
    parse_address,
)


@dataclass(frozen=True)
class CallScope:
    """The workspace and topics one call reads and writes, and every address it names."""

    workspace: str
    read_topics: frozenset[str] = field(default_factory=frozenset)
    write_topics: frozenset[str] = field(default_factory=frozenset)
    addresses: tuple[str, ...] = ()


def _uris(value: object, argument: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return list(value)
    raise InvalidArgument(f"{argument} must be a list of bb:// addresses", argument=argument)


def _topic_arg(args: Mapping[str, Any], grant: Grant) -> CallScope:
    topic = args.get("topic")
    if topic is None:
        return CallScope(grant.workspace)
    if not isinstance(topic, str) or not is_valid_name(topic):
        raise InvalidArgument(f"topic {topic!r} is not a valid topic name", argument="topic")
    return CallScope(grant.workspace, read_topics=frozenset([topic]))


def scope_of(tool: str, args: Mapping[str, Any], grant: Grant) -> CallScope:
    """Which topics ``tool`` would read and write with ``args``, from the addresses alone."""
    if tool in ("list_keys", "search_keys"):
        return _topic_arg(args, grant)
    if tool == "get_state":
        uris = _uris(args.get("uris"), "uris")
        addresses = [parse_address(u, argument="uris") for u in uris]
        return _scope(grant, reads=addresses, writes=[])
    if tool == "update_state":
        target = parse_address(args.get("uri"))
        sources = [
            parse_address(u, argument="sources") for u in _uris(args.get("sources"), "sources")
        ]
        return _scope(grant, reads=sources, writes=[target])
    # link_state: the source note gains the link; the targets are read (their names are shown).
    src = parse_address(args.get("src"), argument="src")
    dst = [parse_address(u, argument="dst") for u in _uris(args.get("dst"), "dst")]
    return _scope(grant, reads=dst, writes=[src])


def _scope(grant: Grant, *, reads: list[Any], writes: list[Any]) -> CallScope:
    everything = [*writes, *reads]
    workspaces = {a.workspace for a in everything}
    # A call's addresses must all be in the token's workspace; the authoriser names the
    # mismatch, so report the first foreign one as the call's workspace.
    foreign = sorted(w for w in workspaces if w != grant.workspace)
    return CallScope(
        workspace=foreign[0] if foreign else grant.workspace,
        read_topics=frozenset(a.topic for a in reads),
        write_topics=frozenset(a.topic for a in writes),
        addresses=tuple(a.uri for a in everything),
    )


def _required(args: Mapping[str, Any], *names: str) -> dict[str, Any]:
    # A missing required argument reaches the store as None, which names it in its error.
    return {**dict.fromkeys(names), **args}


def _readable(grant: Grant) -> Readable:
    # The store recognises this very predicate and searches without a topic filter.
    return every_topic if grant.reads_every_topic else grant.can_read


Handler = Callable[[Board, Grant, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]


# The writes and get_state take the call's admission (revocation and rate limit) as a gate
# that rides their first round trip to Redis (store/connection/_tx.py), judged before anything is
# written or anything read is used; ToolCaller passes it. list_keys and search_keys are
# admitted in a round trip of their own before their handler runs.
GATED = frozenset({"update_state", "link_state", "get_state"})


async def update_state(
    board: Board, grant: Grant, args: Mapping[str, Any], gate: Gate | None = None
) -> Mapping[str, Any]:
    return await board.update_state(
        author=grant.subject,
        readable=grant.can_read,
        gate=gate,
        **_required(args, "uri", "digest"),
    )


async def get_state(
    board: Board, grant: Grant, args: Mapping[str, Any], gate: Gate | None = None
) -> Mapping[str, Any]:
    return await board.get_state(readable=grant.can_read, gate=gate, **_required(args, "uris"))


async def list_keys(board: Board, grant: Grant, args: Mapping[str, Any]) -> Mapping[str, Any]:
    return await board.list_keys(workspace=grant.workspace, readable=grant.can_read, **args)


async def search_keys(board: Board, grant: Grant, args: Mapping[str, Any]) -> Mapping[str, Any]:
    return await board.search_keys(
        workspace=grant.workspace, readable=_readable(grant), **_required(args, "q")
    )


async def link_state(
    board: Board, grant: Grant, args: Mapping[str, Any], gate: Gate | None = None
) -> Mapping[str, Any]:
    return await board.link_state(
        author=grant.subject,
        readable=grant.can_read,
        gate=gate,
        **_required(args, "src", "rel", "dst"),
    )


HANDLERS: dict[str, Handler] = {
    "update_state": update_state,
    "get_state": get_state,
    "list_keys": list_keys,
    "search_keys": search_keys,
    "link_state": link_state,
}
