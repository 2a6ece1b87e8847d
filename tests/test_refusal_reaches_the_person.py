"""A request the gateway refuses before MCP (a bad token, a body over the limit) says why, to
the person using an MCP client, not only to a raw HTTP caller.

The refusal is a JSON-RPC error in a JSON body at the HTTP status of the refusal: the `mcp`
SDK's client raises it as an MCPError with the gateway's own message (where a body it cannot
read as JSON-RPC becomes "Server returned an error response"), and an HTTP caller still finds
the board's code and hint in ``error.data``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import httpx2
import orjson
import pytest
from app_support import BASE_URL, HEADERS, MCP_PATH, in_process_gateway
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from support import agent_token

from blackboard_mcp.auth import TokenIssuer


@contextlib.asynccontextmanager
async def sdk_client(app: object, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),  # type: ignore[arg-type]
            base_url=BASE_URL,
            headers={"Authorization": f"Bearer {token}"},
        ) as http,
        Client(streamable_http_client(BASE_URL + MCP_PATH, http_client=http)) as client,
    ):
        yield client


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def test_a_token_that_is_not_a_jwt_is_named_so_by_the_sdk_client(
    redis_url: str, tmp_path: Path
) -> None:
    # The client's connect fails inside its task group, so the MCPError comes in a group.
    async with in_process_gateway(redis_url, tmp_path) as gateway:
        with pytest.RaisesGroup(MCPError, allow_unwrapped=True, flatten_subgroups=True) as refused:
            async with sdk_client(gateway.app, "not-a-token") as client:
                await client.list_tools()
    said = " | ".join(str(e) for e in _leaves(refused.value))
    assert "the token is not a JWT" in said, said
    assert "ask the board's admin or your identity provider for a valid token" in said, said


async def test_a_body_over_the_limit_is_named_so_by_the_sdk_client(
    redis_url: str, tmp_path: Path, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    async with (
        in_process_gateway(redis_url, tmp_path, max_request_bytes=4096) as gateway,
        sdk_client(gateway.app, token) as client,
    ):
        await client.list_tools()
        with pytest.raises(MCPError) as refused:
            await client.call_tool(
                "update_state",
                {"uri": f"bb://{workspace}/t/big", "digest": "d", "body": "x" * 8192},
            )
    assert "request body over 4096 bytes" in str(refused.value), refused.value


async def test_an_http_caller_still_reads_the_status_code_and_hint(
    redis_url: str, tmp_path: Path
) -> None:
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
    async with in_process_gateway(redis_url, tmp_path) as gateway:
        answer: httpx.Response = await gateway.http.post(
            MCP_PATH,
            content=orjson.dumps(message),
            headers={**HEADERS, "Authorization": "Bearer not-a-token"},
        )
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer ")
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["message"].startswith("the token is not a JWT")
    data = body["error"]["data"]
    assert data["code"] == "unauthenticated" and data["hint"]
