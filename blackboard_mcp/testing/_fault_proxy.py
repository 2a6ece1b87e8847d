"""A loopback TCP proxy that misbehaves on request: between the gateways and Redis, it delays
what it forwards, cuts every open connection, or refuses new ones for a while.

It runs on the caller's event loop. Each connection is two pumps, one per direction; a delay
holds each chunk that long before forwarding it (order is kept), so a reply can arrive after
the client that asked has given up, the case a history checker must treat as unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass
class FaultProxy:
    target_host: str
    target_port: int
    delay: float = 0.0  # seconds each chunk is held, both ways
    refusing: bool = False  # new connections are closed at once
    # The reply to a request holding these bytes is dropped and its connection cut: the
    # command ran, its caller never hears so (a reply lost in the network).
    lose_reply_to: bytes | None = None
    cuts: int = 0
    _server: asyncio.Server | None = None
    _open: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> int:
        """Listen on a free loopback port; returns it."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def cut(self) -> None:
        """Close every open connection, both sides, mid-stream: requests in flight are lost
        or their replies never arrive."""
        self.cuts += 1
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._open.update((writer, up_writer))
        doomed = asyncio.Event()  # this connection's next reply is to be lost
        await asyncio.gather(
            self._pump(reader, up_writer, doomed=doomed),
            self._pump(up_reader, writer, doomed=doomed, replies=True),
            return_exceptions=True,
        )
        for end in (writer, up_writer):
            self._open.discard(end)
            end.transport.abort()

    async def _pump(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        *,
        doomed: asyncio.Event,
        replies: bool = False,
    ) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while chunk := await source.read(65536):
                if self.delay:
                    await asyncio.sleep(self.delay)
                if sink.transport.is_closing():
                    return
                if replies and doomed.is_set():
                    self.cut()
                    return
                if not replies and self.lose_reply_to is not None and self.lose_reply_to in chunk:
                    doomed.set()
                sink.write(chunk)
                await sink.drain()
        sink.transport.abort()
