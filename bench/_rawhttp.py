"""A minimal keep-alive HTTP/1.1 client for load generation, and process CPU accounting.

The load generator shares the machine's two cores with the gateway it measures, so it must
cost as little as possible per call: httpx spends about as much CPU per request as the
gateway does to answer it. This client writes one request and reads one response with a
Content-Length on a kept-alive connection, and nothing else.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


class RawHttpConnection:
    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self._host = host
        self._port = port
        self._head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, extra_headers: str = "") -> tuple[int, bytes]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        assert self._reader is not None
        self._writer.write(
            (
                f"POST {path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n{self._head}"
                f"{extra_headers}Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        head = await self._reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "transfer-encoding":
                raise RuntimeError("chunked responses are not expected from the gateway")
        return status, await self._reader.readexactly(length)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            await self._writer.wait_closed()
            self._writer = None


def process_tree_cpu_seconds(pid: int) -> float:
    """User plus system CPU of ``pid`` and every live descendant (uvicorn's workers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total = 0.0
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        todo.extend(children.get(current, []))
    return total
