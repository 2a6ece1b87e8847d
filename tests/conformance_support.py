"""A pass-through HTTP front for the gateway that adds a bearer token to every request.

The MCP conformance suite's client sends no Authorization header and has no option for one;
every request to the gateway needs a token. This front stands where a client's configured
token would: it forwards each request as it came (method, path, query, headers, body) with
the token added, and streams the answer back as it arrives (SSE included).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

# Hop-by-hop headers, and the ones the front sets itself.
_DROPPED = {"host", "content-length", "connection", "transfer-encoding", "authorization"}


def _front(upstream: str, token: str) -> Starlette:
    client = httpx.AsyncClient(timeout=httpx.Timeout(30.0), base_url=upstream)

    async def forward(request: Request) -> StreamingResponse:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _DROPPED]
        headers.append(("authorization", f"Bearer {token}"))
        sent = client.build_request(
            request.method,
            request.url.path,
            params=request.query_params,
            headers=headers,
            content=await request.body(),
        )
        answer = await client.send(sent, stream=True)
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _DROPPED}
        return StreamingResponse(
            answer.aiter_raw(),
            status_code=answer.status_code,
            headers=kept,
            background=BackgroundTask(answer.aclose),
        )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        await client.aclose()

    methods = ["GET", "POST", "DELETE", "OPTIONS"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)], lifespan=lifespan)


@contextmanager
def token_front(upstream: str, token: str) -> Iterator[str]:
    """Serve the front on a free local port for the block; yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        _front(upstream, token), host="127.0.0.1", port=port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the token front did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
