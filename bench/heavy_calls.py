"""What heavy calls cost the other calls of their gateway process, this checkout against revisions.

A note's token counts are exact (cl100k), and counting takes about 40 microseconds a KiB: a
body of 1 MiB is tens of milliseconds of counting when it is written, and more when it is
read in full (the answer is counted, and cut to the budget). A listing without a topic reads
every topic of the workspace. While such work runs on a gateway process's event loop, or
holds its Redis connections, every other call of that process waits for it.

Each revision's gateway (one worker, on one embedded Redis without persistence) is probed by
4 connections, each reading one short note (get_state, digest) back to back, for
``--seconds`` per cell; a probe's latency is what an agent sharing the process with the long
notes sees. Cells: ``quiet`` (nothing else runs), ``long writes`` (another process rewrites a
note of 1,000,000 characters back to back, a new text each time) and ``long reads`` (another
process reads such a note in full with a budget of 100,000 tokens back to back). Rounds
interleave the revisions.

    python bench/heavy_calls.py [--seconds 5] [--rounds 3] [--against REV]...

Prints, per cell and revision, the probes' calls/s, p50, p99 and longest wait, and how many
long calls (or listings) were made meanwhile (medians of the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import random
import sys
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path

import orjson
import uvloop
from _harness import (
    Figures,
    bench_token,
    embedded_redis,
    mcp_headers,
    percentile,
    random_text,
    revision_table,
    revisions,
    rounds,
    start_bench_gateway,
)
from _rawhttp import RawHttpConnection

from blackboard_mcp.store import Board, UpdateState, board_client

CELLS = ("quiet", "long writes", "long reads", "long listings", "every topic")
LISTED = 200
TOPICS = 5000
TOPICS_WORKSPACE = "bench-heavy-topics"
PROBES = 4
LONG_CHARS = 1_000_000
_WORDS = (
    "the agent found that incident 4412 was caused by a stale cache entry on node seven",
    "while the deploy of build 981 rolled through the east region and retried twice",
)


def _call(request_id: int, tool: str, arguments: Mapping[str, object]) -> bytes:
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    )


def _long_text(seed: int) -> str:
    return random_text(random.Random(seed), LONG_CHARS, " ".join(_WORDS).split())


async def _checked(conn: RawHttpConnection, body: bytes) -> None:
    status, answer = await conn.post("/mcp/", body)
    if status != 200 or b'"isError":true' in answer:
        raise SystemExit(f"a call failed: {answer[:300]!r}")


def _long_calls(port: int, token: str, workspace: str, cell: str, stop: Connection) -> None:
    """Another process: the cell's heavy calls back to back until told to stop; sends back how
    many it made."""

    async def run() -> int:
        conn = RawHttpConnection("127.0.0.1", port, mcp_headers(token))
        base = _long_text(1)
        uri = f"bb://{workspace}/long/note"
        if cell in ("long writes", "long reads"):
            note = {"uri": uri, "digest": "long", "body": base}
            await _checked(conn, _call(1, "update_state", note))
        made = 0
        try:
            while not stop.poll():
                made += 1
                if cell == "every topic":
                    await _checked(conn, _call(made + 1, "list_keys", {"limit": LISTED}))
                elif cell == "long listings":
                    for n in range(LISTED):
                        digest = f"{made:07d} {n} " + base[: 1000 - 16]
                        note = {"uri": f"bb://{workspace}/list/n{n}", "digest": digest, "body": ""}
                        await _checked(conn, _call(made + 1, "update_state", note))
                    listing = {"topic": "list", "limit": LISTED, "budget_tokens": 100_000}
                    await _checked(conn, _call(made + 1, "list_keys", listing))
                elif cell == "long writes":
                    # A new text each time: a count already made is remembered.
                    text = f"{made:07d} " + base[8:]
                    arguments: dict[str, object] = {"uri": uri, "digest": "long", "body": text}
                    await _checked(conn, _call(made + 1, "update_state", arguments))
                else:
                    arguments = {"uris": [uri], "mode": "full", "budget_tokens": 100_000}
                    await _checked(conn, _call(made + 1, "get_state", arguments))
        finally:
            await conn.close()
        return made

    made = uvloop.run(run())
    stop.recv()
    stop.send(made)


async def _probe(port: int, token: str, workspace: str, seconds: float) -> list[float]:
    uri = f"bb://{workspace}/short/note"
    conns = [RawHttpConnection("127.0.0.1", port, mcp_headers(token)) for _ in range(PROBES)]
    await _checked(conns[0], _call(1, "update_state", {"uri": uri, "digest": "short", "body": "s"}))
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds
    read = _call(2, "get_state", {"uris": [uri]})

    async def probe(conn: RawHttpConnection) -> None:
        while time.perf_counter() < stop_at:
            began = time.perf_counter()
            await _checked(conn, read)
            latencies.append(time.perf_counter() - began)

    try:
        await asyncio.gather(*(probe(c) for c in conns))
    finally:
        for conn in conns:
            await conn.close()
    return latencies


async def _seed_topics(redis_url: str) -> None:
    """The workspace of the ``every topic`` cell: a note in each of TOPICS topics."""
    board = Board(client=board_client(redis_url))
    await board.start()
    gate = asyncio.Semaphore(32)

    async def write(n: int) -> None:
        async with gate:
            note = {"uri": f"bb://{TOPICS_WORKSPACE}/t{n:04d}/note", "digest": f"topic {n}"}
            await board.update_state(UpdateState.parse({**note, "body": ""}), author="bench")

    try:
        await asyncio.gather(*(write(n) for n in range(TOPICS)))
    finally:
        await board.close()


def run_cell(
    redis_url: str, tree: Path | None, label: str, cell: str, seconds: float, round_no: int
) -> dict[str, float]:
    tag = "".join(c for c in label.lower() if c.isalnum())[:12]
    workspace = f"bench-heavy-{tag}-{round_no}"
    token = bench_token(workspace=workspace, ttl_seconds=3600)
    with start_bench_gateway(redis_url, package_root=tree) as gateway:
        other = None
        mine, theirs = mp.Pipe()
        if cell != "quiet":
            at, its_token = workspace, token
            if cell == "every topic":
                at = TOPICS_WORKSPACE
                its_token = bench_token(workspace=at, ttl_seconds=3600)
            other = mp.Process(target=_long_calls, args=(gateway.port, its_token, at, cell, theirs))
            other.start()
            time.sleep(1.0)  # its first long write is made before the probes begin
        latencies = uvloop.run(_probe(gateway.port, token, workspace, seconds))
        made = 0
        if other is not None:
            mine.send("stop")
            made = mine.recv()
            other.join(30)
    return {
        "calls_per_s": len(latencies) / seconds,
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "max_ms": max(latencies) * 1000,
        "long_calls": made,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M")
    measured: Figures[tuple[str, str], dict[str, float]] = Figures()
    with revisions(args.against) as trees, embedded_redis(append_only=False) as redis:
        asyncio.run(_seed_topics(redis.url))
        for number, order in rounds(args.rounds, trees):
            for cell in CELLS:
                for label, tree in order:
                    figure = run_cell(redis.url, tree, label, cell, args.seconds, number)
                    measured.add((label, cell), figure)
                    print(
                        f"  round {number} {cell:<12} {label:<14} p99 {figure['p99_ms']:.1f} ms, "
                        f"longest {figure['max_ms']:.1f} ms",
                        flush=True,
                    )
    print(
        f"{PROBES} connections reading a short note; {args.seconds:g} s per cell, median of "
        f"{args.rounds} rounds, revisions' order alternating; started {started}"
    )
    columns = [
        ("calls/s", "calls_per_s", ".0f"),
        ("p50 ms", "p50_ms", ".2f"),
        ("p99 ms", "p99_ms", ".2f"),
        ("longest", "max_ms", ".1f"),
        ("heavy calls", "long_calls", ".0f"),
    ]
    labels = [label for label, _ in trees]
    print("\n".join(revision_table(measured, CELLS, labels, columns)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
