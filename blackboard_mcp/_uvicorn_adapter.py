"""The adapter to uvicorn: the HTTP server's own limits, as a subclass of its httptools protocol.

uvicorn closes an idle kept-alive connection (``timeout_keep_alive``) but has no deadline
for a request's headers or body, and its ``limit_concurrency`` answers 503 only once a
request's headers are complete, so a client that never finishes them holds its connection
for ever and is never counted out. ``GuardedHttpToolsProtocol`` adds what is missing, per
connection, on the event loop's own timers (no task, no thread):

- a header deadline from the connection's first moment (or, on a kept-alive connection,
  from the first byte of the next request) to the end of its headers: 408 and close;
- a header size cap: 431 and close (httptools by itself buffers headers without limit);
- a body deadline from the end of the headers to the end of the body: close (the app sees
  a disconnect);
- a cap on open connections per process, refused with 503 as soon as they are accepted.

uvicorn documents the protocol class as a setting (``http=``) but not the class it ships,
whose callbacks and attributes (``cycle``, ``connections``, ``transport``) this module
overrides and reads; nor its supervisor of worker processes (``WorkerProcesses`` wraps it),
which `serve --workers N` runs on a socket it has bound itself, as ``uvicorn.run`` cannot.
That coupling lives here alone, and the package caps uvicorn at the releases this module
was tested against (``TESTED``, the same range as pyproject.toml's);
``tests/test_library_ranges.py`` fails with the range it needs.

It lives outside ``gateway/`` on purpose: uvicorn's worker processes are spawned, and each
unpickles its config (this protocol included) before it starts answering the supervisor's
health pings; importing the gateway package there (the MCP SDK, Starlette: seconds on a
busy machine) got workers killed as hung before they started. So this module imports
uvicorn and the settings only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from dataclasses import dataclass
from typing import Any, cast

from uvicorn import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from blackboard_mcp.settings import Settings

log = logging.getLogger(__name__)

# Keep equal to pyproject.toml's uvicorn requirement (a test holds them together).
TESTED = ">=0.55,<0.56"

_REFUSALS = {
    408: b"HTTP/1.1 408 Request Timeout\r\n",
    431: b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
    503: b"HTTP/1.1 503 Service Unavailable\r\n",
}
# An attack refuses thousands of connections; say so in the log once in a while, not each time.
_LOG_EVERY_SECONDS = 10.0


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_seconds: float
    body_timeout_seconds: float
    max_header_bytes: int
    max_connections: int


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header and body deadlines and a connection cap."""

    _last_logged: dict[int, float] = {}  # noqa: RUF012  # per status, shared by every connection

    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._deadline: asyncio.TimerHandle | None = None
        self._in_headers = False
        self._header_bytes = 0

    # asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self._limits.max_connections:
            self._refuse(503, "connection cap (BB_MAX_CONNECTIONS) reached")
            return
        # A connection that never sends a byte is held to the header deadline too.
        self._begin_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # runs the parser callbacks below
        if self._in_headers and not self.transport.is_closing():
            # The whole chunk counts: what the parser keeps is at most the cap plus one read.
            self._header_bytes += len(data)
            if self._header_bytes > self._limits.max_header_bytes:
                self._refuse(431, "request headers over BB_MAX_HEADER_BYTES")

    # httptools parser callbacks --------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if not self._in_headers:  # the next request on a kept-alive connection
            self._begin_headers()

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._arm(self._limits.body_timeout_seconds, self._body_overdue)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    # the guard -------------------------------------------------------------------------------

    def _begin_headers(self) -> None:
        self._in_headers = True
        self._header_bytes = 0
        self._arm(self._limits.header_timeout_seconds, self._headers_overdue)

    def _arm(self, seconds: float, callback: Any) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, callback)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_overdue(self) -> None:
        self._deadline = None
        self._refuse(408, "request headers not received within BB_HEADER_TIMEOUT_SECONDS")

    def _body_overdue(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        self._log(408, "request body not received within BB_BODY_TIMEOUT_SECONDS")
        # The app is already reading this request: no answer of ours may cut into one it
        # might be writing, so just close; the app's receive() sees a disconnect.
        self.transport.close()

    def _refuse(self, status: int, reason: str) -> None:
        self._disarm()
        self._in_headers = False
        if self.transport.is_closing():
            return
        self._log(status, reason)
        # Only between requests can a response of ours not interleave with the app's.
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(
                _REFUSALS[status] + b"content-length: 0\r\nconnection: close\r\n\r\n"
            )
        self.transport.close()

    def _log(self, status: int, reason: str) -> None:
        now = time.monotonic()
        if now - self._last_logged.get(status, float("-inf")) >= _LOG_EVERY_SECONDS:
            self._last_logged[status] = now
            log.warning(
                "closing connections: %s (answer %d; logged every %gs at most)",
                reason,
                status,
                _LOG_EVERY_SECONDS,
            )


# Seconds a stopping process gives open responses (event streams included) before it cuts them.
STOP_GRACE_SECONDS = 5


def server_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments for ``uvicorn.run`` that carry the server's limits."""
    limits = ConnectionLimits(
        header_timeout_seconds=settings.header_timeout_seconds,
        body_timeout_seconds=settings.body_timeout_seconds,
        max_header_bytes=settings.max_header_bytes,
        max_connections=settings.max_connections,
    )
    # A partial of a module-level class pickles by reference, so it reaches the worker
    # processes uvicorn spawns; uvicorn calls it as it would the class.
    protocol = functools.partial(GuardedHttpToolsProtocol, limits=limits)
    return {
        "http": cast("type[asyncio.Protocol]", protocol),
        "timeout_keep_alive": settings.keep_alive_seconds,
        # uvicorn believes X-Forwarded-* from 127.0.0.1 by default: any local user could then
        # rewrite the scheme of the metadata URLs. Only the proxies the operator names.
        "proxy_headers": bool(settings.forwarded_allow_ips),
        "forwarded_allow_ips": settings.forwarded_allow_ips or None,
        # A stop waits for open responses, and a listen stream or a board feed never ends by
        # itself: without a bound, one open listener kept a stopping gateway up for ever.
        "timeout_graceful_shutdown": STOP_GRACE_SECONDS,
    }


class WorkerProcesses:
    """uvicorn's supervisor of ``config.workers`` processes serving on ``listener``.

    It takes over SIGINT, SIGTERM and SIGHUP while it runs: the first two stop it (``run``
    returns once the workers have drained), SIGHUP restarts the workers.
    """

    def __init__(self, config: Config, listener: socket.socket) -> None:
        # Imported here: a worker process imports this module to unpickle its protocol,
        # and needs none of the supervisor.
        from uvicorn.supervisors import Multiprocess

        self._supervisor = Multiprocess(config, sockets=[listener])

    def run(self) -> None:
        self._supervisor.run()

    def stop(self) -> None:
        """Make ``run`` return, as SIGTERM would; callable from a signal handler or a thread."""
        self._supervisor.should_exit.set()
