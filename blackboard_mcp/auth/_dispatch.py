"""Binding contract tools to handlers, and refusing a call before its handler runs."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Generic, TypeVar

from ._errors import (
    ContractError,
    MissingCapability,
    MissingMemoryGrant,
    MissingSecret,
    TopicNotReadable,
    TopicNotWritable,
    Unauthenticated,
    WrongWorkspace,
)
from ._grants import Grant
from ._tb import Contract, Requirements, ToolRequirements

# What a tool is bound to: its handler, or whatever the host keeps to run it.
H = TypeVar("H")


class Manifest(Generic[H]):
    """A handler per contract tool: no contract, no registration; no binding, no call.

    An endpoint (a way in that is not a tool) runs only on what the contract states for it."""

    def __init__(self, contract: Contract) -> None:
        self._contract = contract
        self._handlers: dict[str, H] = {}
        # Looked up on every call: index by MCP name once rather than derive names each time.
        self._requirements = {t.mcp_name: t for t in contract.tools.values()}

    def bind(self, mcp_name: str, handler: H) -> None:
        if mcp_name not in self._requirements:
            raise ContractError(f"{mcp_name} has no contract; declare it in the .tb file first")
        self._handlers[mcp_name] = handler

    def require_complete(self) -> None:
        unbound = [
            t.mcp_name for t in self._contract.tools.values() if t.mcp_name not in self._handlers
        ]
        if unbound:
            raise ContractError(f"contract tools without a handler: {', '.join(unbound)}")

    def requirements_for(self, mcp_name: str) -> ToolRequirements:
        tool = self._requirements.get(mcp_name)
        if tool is None:
            raise ContractError(f"{mcp_name} has no contract")
        return tool

    def handler(self, mcp_name: str) -> H:
        if mcp_name not in self._handlers:
            raise ContractError(f"{mcp_name} has no handler bound")
        return self._handlers[mcp_name]

    def bound(self, mcp_name: str) -> H | None:
        """The handler bound to ``mcp_name``, or None for a name that is no bound tool."""
        return self._handlers.get(mcp_name)

    def endpoint(self, name: str) -> Requirements:
        endpoint = self._contract.endpoints.get(name)
        if endpoint is None:
            raise ContractError(f"{name} has no contract; declare it in the .tb file first")
        return endpoint


class Authorizer:
    """The checks, in order; each refusal names what was missing (never a secret's value)."""

    def authorize(
        self,
        grant: Grant | None,
        tool: Requirements,
        *,
        arguments_present: AbstractSet[str],
        workspace: str,
        read_topics: AbstractSet[str],
        write_topics: AbstractSet[str],
        corrected: str | None = None,
        reads_catch_up_only: bool = False,
    ) -> None:
        """``corrected``: the call's address in another workspace, moved into the token's,
        for the refusal to name. ``reads_catch_up_only``: the call reads nothing but the
        workspace's catch-up note, which needs no read topic (its read of topic ``run`` is
        not among ``read_topics``)."""
        if grant is None:
            raise Unauthenticated("no access token")
        if workspace != grant.workspace:
            # An agent that names another workspace has guessed its own: the fix is the
            # address, not a token, so the hint is the address it meant.
            raise WrongWorkspace(
                f"the token is for workspace {grant.workspace!r}, not {workspace!r}",
                hint=f"use {corrected}"
                if corrected
                else f"use workspace {grant.workspace!r} in the address",
            )
        for capability in sorted(tool.capabilities_for(arguments_present)):
            if not grant.has_capability(capability):
                raise MissingCapability(
                    f"{tool.audit_name} requires capability {capability!r}", capability=capability
                )
        if tool.memory_reads and not grant.read_topics and not reads_catch_up_only:
            raise MissingMemoryGrant(f"{tool.audit_name} reads the board; the token reads nothing")
        if tool.memory_writes and not grant.write_topics:
            raise MissingMemoryGrant(
                f"{tool.audit_name} writes the board; the token writes nothing"
            )
        for topic in sorted(read_topics):
            if not grant.can_read(topic):
                raise TopicNotReadable(f"the token may not read topic {topic!r}", topic=topic)
        for topic in sorted(write_topics):
            if not grant.can_write(topic):
                raise TopicNotWritable(f"the token may not write topic {topic!r}", topic=topic)
        for handle in sorted(tool.secrets):
            if handle not in grant.secrets:
                raise MissingSecret(
                    f"{tool.audit_name} needs secret handle {handle}", handle=handle
                )
