"""Helpers shared by the gateway tests: tokens, the SDK's client, and the names of the one
gateway launcher (blackboard_mcp.testing) the tests import from here."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from blackboard_mcp.testing import (
    TEST_JWT_SECRET,
    GatewayProcess,
    child_process,
    start_gateway,
    stop_gateway,
)

if TYPE_CHECKING:
    from blackboard_mcp.auth import TokenIssuer

__all__ = [
    "TEST_JWT_SECRET",
    "GatewayProcess",
    "admin_token",
    "agent_token",
    "call",
    "child_process",
    "mcp_client",
    "start_gateway",
    "stop_gateway",
]


def agent_token(
    issuer: TokenIssuer,
    workspace: str,
    *,
    sub: str = "agent-1",
    read: list[str] | None = None,
    write: list[str] | None = None,
    caps: list[str] | None = None,
    ttl: int = 600,
) -> str:
    return issuer.issue(
        subject=sub,
        workspace=workspace,
        read=["*"] if read is None else read,
        write=["*"] if write is None else write,
        capabilities=["board_read", "board_write", "file_read"] if caps is None else caps,
        ttl_seconds=ttl,
    )


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str | None) -> AsyncIterator[Client]:
    """The SDK's own client over Streamable HTTP with a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30.0) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    """Call ``tool``; returns (is_error, structured body)."""
    result = await client.call_tool(tool, arguments)
    body = result.structured_content
    assert isinstance(body, dict), result
    return bool(result.is_error), body


def admin_token(issuer: TokenIssuer, workspace: str, *, sub: str = "admin", ttl: int = 600) -> str:
    """An admin of ``workspace`` as `serve` makes one: every topic, every capability."""
    return issuer.issue(
        subject=sub,
        workspace=workspace,
        read=["*"],
        write=["*"],
        capabilities=["admin", "board_read", "board_write", "file_read"],
        ttl_seconds=ttl,
    )
