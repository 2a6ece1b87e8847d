"""A recorded workload for the history checker: clients that write, append and read a few notes
through the gateways, each call kept as an Operation (_linearizability.py).

Each client is sequential, as an agent is: it reads a note and writes it back with the version
it read (compare-and-swap), appends a line to the log note, or reads. Every write's content is
unique, so a read names the write it saw. A call whose answer does not say what happened (a
timeout, a cut or refused connection, an HTTP error, a tool error other than a conflict) is
recorded with an unknown outcome: the write may have landed. A client whose gateway stops
answering moves to the next one, as behind a load balancer.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from ._linearizability import Operation

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# Enough for the log note's whole body in one read.
READ_BUDGET = 100_000


@dataclass
class Workload:
    """``clients`` agents on ``notes`` (CAS) and ``log`` (appends) through ``urls``."""

    urls: list[str]
    tokens: Sequence[str]  # one per client
    notes: list[str]
    log: str
    call_timeout: float = 5.0
    # Clients whose timeout is shorter than the server's: they give up on calls that may land.
    short_timeout: float | None = None
    short_clients: int = 0
    seed: int = 0
    operations: list[Operation] = field(default_factory=list)
    transport_errors: Counter[str] = field(default_factory=Counter)
    stopping: bool = False
    _waiting: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)

    async def reached(self, count: int) -> None:
        """Once ``count`` operations are recorded: faults are placed by progress, not by time."""
        if len(self.operations) >= count:
            return
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((count, done))
        await done

    def _record(self, op: Operation) -> None:
        self.operations.append(op)
        for count, done in list(self._waiting):
            if len(self.operations) >= count:
                self._waiting.remove((count, done))
                if not done.done():
                    done.set_result(None)

    async def prepare(self, url: str) -> None:
        """The log note, created before the clients start (an append extends a note)."""
        async with httpx.AsyncClient(headers=HEADERS) as http:
            version = await self._write(http, url, 0, "setup", self.log, 0, "log:", 30.0)
        if version != 1:
            raise RuntimeError(f"could not create {self.log}")

    async def final_reads(self, url: str) -> None:
        """A read of every note once the clients have stopped: what the board holds at the end
        (every acknowledged write must be in it)."""
        async with httpx.AsyncClient(headers=HEADERS) as http:
            for note in [*self.notes, self.log]:
                if await self._read(http, url, 0, "final", note, 30.0) is None:
                    raise RuntimeError(f"the final read of {note} failed: {self.transport_errors}")

    async def run(self, seconds: float | None = None, *, ops_per_client: int | None = None) -> None:
        """Drive every client until ``stop()``, ``seconds`` pass, or each made its calls."""
        clients = len(self.tokens)
        limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients)
        async with httpx.AsyncClient(headers=HEADERS, limits=limits) as http:
            drivers = [
                asyncio.create_task(self._client(http, c, ops_per_client)) for c in range(clients)
            ]
            if seconds is not None:
                await asyncio.sleep(seconds)
                self.stopping = True
            await asyncio.gather(*drivers)

    def stop(self) -> None:
        self.stopping = True

    async def _client(self, http: httpx.AsyncClient, cid: int, limit: int | None) -> None:
        rng = random.Random(self.seed * 1000 + cid)
        name = f"c{cid}"
        gateway = cid % len(self.urls)
        timeout = self.call_timeout
        if self.short_timeout is not None and cid < self.short_clients:
            timeout = self.short_timeout
        made = 0
        seq = 0
        known: dict[str, int] = {}
        while not self.stopping and (limit is None or made < limit):
            made += 1
            url = self.urls[gateway]
            roll = rng.random()
            if roll < 0.2:
                seq += 1
                ok = await self._append(http, url, cid, name, f"{name}.{seq};", timeout)
            elif roll < 0.6:
                note = rng.choice(self.notes)
                seq += 1
                expect = known.get(note, 0)
                content = f"{name}.{seq}"
                ok = await self._write(http, url, cid, name, note, expect, content, timeout)
                if ok is not None:
                    known[note] = ok
            else:
                note = rng.choice([*self.notes, self.log])
                ok = await self._read(http, url, cid, name, note, timeout)
                if ok is not None and note != self.log:
                    known[note] = ok
            if ok is None:
                # Unknown or refused: maybe this gateway is gone; the next call goes elsewhere.
                gateway = (gateway + 1) % len(self.urls)
                known.clear()

    async def _call(
        self, http: httpx.AsyncClient, url: str, cid: int, tool: str, args: dict[str, Any],
        timeout: float,
    ) -> dict[str, Any] | None:  # fmt: skip
        """The tool's structured answer, or None when the call's outcome is unknown."""
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": args},
        }
        try:
            response = await http.post(
                url,
                content=orjson.dumps(request),
                headers={"Authorization": f"Bearer {self.tokens[cid]}"},
                timeout=timeout,
            )
        except httpx.TimeoutException:
            self.transport_errors["timeout"] += 1
            return None
        except httpx.TransportError:
            self.transport_errors["connection"] += 1
            return None
        if response.status_code != 200:
            self.transport_errors[f"http {response.status_code}"] += 1
            return None
        result = orjson.loads(response.content).get("result") or {}
        body: dict[str, Any] = result.get("structuredContent") or {}
        if result.get("isError"):
            code = str(body.get("error", {}).get("code"))
            if code != "conflict":
                self.transport_errors[code] += 1
                return None
        return body

    async def _write(
        self, http: httpx.AsyncClient, url: str, cid: int, name: str, note: str,
        expect: int, content: str, timeout: float,
    ) -> int | None:  # fmt: skip
        args = {"uri": note, "digest": "d", "body": content, "expect_version": expect}
        invoked = time.monotonic()
        body = await self._call(http, url, cid, "update_state", args, timeout)
        completed = time.monotonic()
        common = {"expect_version": expect, "content": content}
        if body is None:
            self._record(
                Operation(name, note, "write", invoked, None, "unknown", **common)  # type: ignore[arg-type]
            )
            return None
        error = body.get("error")
        if error is not None:
            current = int(error["current_version"])
            self._record(
                Operation(
                    name, note, "write", invoked, completed, "conflict", version=current,
                    yours=bool(error.get("yours")), **common,  # type: ignore[arg-type]
                )
            )  # fmt: skip
            return current
        version = int(body["version"])
        self._record(
            Operation(name, note, "write", invoked, completed, "ok", version=version, **common)  # type: ignore[arg-type]
        )
        return version

    async def _append(
        self, http: httpx.AsyncClient, url: str, cid: int, name: str, text: str,
        timeout: float,
    ) -> int | None:  # fmt: skip
        args = {"uri": self.log, "digest": "log", "append": text}
        invoked = time.monotonic()
        body = await self._call(http, url, cid, "update_state", args, timeout)
        completed = time.monotonic()
        if body is None or "error" in body:
            self._record(
                Operation(name, self.log, "append", invoked, None, "unknown", content=text)
            )
            return None
        version = int(body["version"])
        self._record(
            Operation(
                name, self.log, "append", invoked, completed, "ok", content=text, version=version
            )
        )
        return version

    async def _read(
        self, http: httpx.AsyncClient, url: str, cid: int, name: str, note: str,
        timeout: float,
    ) -> int | None:  # fmt: skip
        args = {"uris": [note], "mode": "full", "budget_tokens": READ_BUDGET}
        invoked = time.monotonic()
        body = await self._call(http, url, cid, "get_state", args, timeout)
        completed = time.monotonic()
        if body is None:
            return None  # a read of unknown outcome constrains nothing
        item = body["items"][0]
        if item.get("error") == "not_found":
            version, seen = 0, None
        elif "error" in item or body.get("truncated"):
            self.transport_errors[f"read {item.get('error') or 'truncated'}"] += 1
            return None
        else:
            version, seen = int(item["version"]), str(item.get("body", ""))
        self._record(
            Operation(name, note, "read", invoked, completed, "ok", version=version, seen=seen)
        )
        return version
