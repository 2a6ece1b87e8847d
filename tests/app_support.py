"""The gateway in process: the real Starlette app, its lifespan run, over httpx's ASGITransport.

For tests of what the gateway answers, where the HTTP server, signals and worker processes are
not the point. The app is built exactly as `serve`'s workers build it (``gateway_parts`` then
``create_app``), against the test's real Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import orjson
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from support import TEST_JWT_SECRET

from blackboard_mcp._composition import gateway_parts
from blackboard_mcp.gateway import create_app
from blackboard_mcp.settings import Settings

BASE_URL = "http://127.0.0.1:8765"
MCP_PATH = "/mcp/"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class InProcessGateway:
    """A running app and an HTTP client that reaches it without a socket."""

    app: Starlette
    http: httpx.AsyncClient
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    # Where the app reads ``source_path`` files from (its ``source_root``).
    source_root: Path | None = None

    async def rpc(self, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One JSON-RPC request to /mcp/; the whole response message."""
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        response = await self.http.post(
            MCP_PATH,
            content=orjson.dumps(message),
            headers={**HEADERS, "Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = orjson.loads(response.content)
        return answer

    async def call(self, token: str, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
        """Call ``tool``; returns (is_error, structured body), as tests/support.call does."""
        answer = await self.rpc(token, "tools/call", {"name": tool, "arguments": arguments})
        result = answer["result"]
        body = result["structuredContent"]
        assert isinstance(body, dict), result
        return bool(result.get("isError")), body

    async def ok(self, token: str, tool: str, **arguments: Any) -> dict[str, Any]:
        """Call ``tool`` and insist it succeeded."""
        is_error, body = await self.call(token, tool, **arguments)
        assert not is_error, body
        return body

    @property
    def mcp_url(self) -> str:
        """The endpoint's URL as the app sees it (no socket listens there)."""
        return BASE_URL + MCP_PATH

    @contextlib.asynccontextmanager
    async def mcp_client(self, token: str | None) -> AsyncIterator[Client]:
        """The SDK's own client, over an ASGI transport to this app, with a bearer token."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=self.app),
                base_url=BASE_URL,
                headers=headers,
                timeout=30.0,
            ) as http,
            Client(streamable_http_client(self.mcp_url, http_client=http)) as client,
        ):
            yield client

    async def response_head(
        self, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, httpx.Headers]:
        """A GET's status and headers, after which the client leaves: how a stream starts,
        which httpx's ASGI transport cannot show (it waits for a response's end)."""
        started = asyncio.Event()
        head: list[tuple[int, httpx.Headers]] = []
        asked = False

        async def receive() -> dict[str, Any]:
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await started.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                head.append((message["status"], httpx.Headers(message.get("headers", []))))
                started.set()

        raw_path, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": raw_path,
            "raw_path": raw_path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [
                (name.lower().encode(), value.encode())
                for name, value in {"host": "127.0.0.1:8765", **(headers or {})}.items()
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8765),
        }
        await asyncio.wait_for(self.app(scope, receive, send), timeout=30)
        [answer] = head
        return answer


def gateway_app(redis_url: str, workdir: Path, **settings: Any) -> Starlette:
    """The app as `serve` builds it, its lifespan not yet entered: for a harness that runs
    the lifespan on its own event loop (schemathesis's ASGI transport)."""
    sources = workdir / "sources"
    sources.mkdir(parents=True, exist_ok=True)
    config = Settings(
        redis_url=redis_url,
        jwt_secret=TEST_JWT_SECRET,
        data_dir=workdir / "data",
        source_root=sources,
        **settings,
    )
    return create_app(gateway_parts(config))


@contextlib.asynccontextmanager
async def in_process_gateway(
    redis_url: str, workdir: Path, **settings: Any
) -> AsyncIterator[InProcessGateway]:
    """The app on ``redis_url``, its lifespan entered; ``settings`` override ``Settings``.

    The lifespan runs in a task of its own, entered and left there: the SDK's session manager
    holds an anyio task group, which must be left by the task that entered it, and a pytest
    fixture (or a property's examples) set up and tear down in different tasks.
    """
    app = gateway_app(redis_url, workdir, **settings)
    started = asyncio.Event()
    stop = asyncio.Event()

    async def hold_lifespan() -> None:
        async with app.router.lifespan_context(app):
            started.set()
            await stop.wait()

    holder = asyncio.create_task(hold_lifespan())
    waiter = asyncio.create_task(started.wait())
    await asyncio.wait([holder, waiter], return_when=asyncio.FIRST_COMPLETED)
    if holder.done():
        waiter.cancel()
        holder.result()  # the start-up's own error
        raise RuntimeError("the app's lifespan ended before it started")
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=BASE_URL
        ) as http:
            yield InProcessGateway(app, http, source_root=workdir / "sources")
    finally:
        stop.set()
        await holder


@contextlib.contextmanager
def gateway_in_a_loop(
    redis_url: str, workdir: Path, **settings: Any
) -> Iterator[tuple[asyncio.Runner, InProcessGateway]]:
    """The gateway held open on one event loop across a property's synchronous examples
    (hypothesis runs each example synchronously; ``runner.run`` drives it on that loop)."""
    with asyncio.Runner() as runner:
        stack = contextlib.AsyncExitStack()
        gateway = runner.run(
            stack.enter_async_context(in_process_gateway(redis_url, workdir, **settings))
        )
        try:
            yield runner, gateway
        finally:
            runner.run(stack.aclose())


@contextlib.contextmanager
def direct_and_sdk_gateways_in_a_loop(
    redis_url: str, workdir: Path, **settings: Any
) -> Iterator[tuple[asyncio.Runner, InProcessGateway, InProcessGateway]]:
    """Two apps on one Redis and one event loop: the default one, and one answering every
    request through the SDK (``direct_tool_calls`` off), to compare the two paths' answers."""
    with asyncio.Runner() as runner:
        stack = contextlib.AsyncExitStack()
        direct = runner.run(
            stack.enter_async_context(in_process_gateway(redis_url, workdir / "direct", **settings))
        )
        sdk = runner.run(
            stack.enter_async_context(
                in_process_gateway(
                    redis_url, workdir / "sdk", **{**settings, "direct_tool_calls": False}
                )
            )
        )
        try:
            yield runner, direct, sdk
        finally:
            runner.run(stack.aclose())
