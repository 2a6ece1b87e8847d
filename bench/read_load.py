"""Reads through the gateway against the direct store call, side by side under one load.

Three reads agents make all the time: ``get_state`` of 10 notes in digest mode,
``search_keys`` of one word over 200 notes (the word is in 20 of them), and ``list_keys`` of
the 20 most recent notes of a topic of 200. Through the gateway the clients are ``wrk``
connections running ``bench/read_call.lua`` (a C load generator, one connection per thread),
against one gateway worker.

"The direct store call" here is the store's own operation, ``Board.get_state``,
``Board.search_keys`` or ``Board.list_keys`` on a board built as the gateway builds it
(``Board.from_url``: same pool, deadline, packing), called in a loop, one call at a time,
from each of 8 processes: the same Redis commands and the same Python work on their answers
(validation, the token budget, the reply), without HTTP, JSON-RPC, the token check,
revocation and rate limit (admission), audit and metrics. It is not bare redis-py: the
store's work on a read is most of a read's cost, and the question is what the gateway adds
to it. The gateway runs in one process; the store runs in 8, so it can use both cores; the
ratio says how close one gateway worker comes to the store called directly. On a quiet
machine that ratio cannot reach 1/2 whatever the gateway does: one process has one core, 8
have two (less what Redis and wrk take), so one worker's share is at most about
s / (2 (s + g)) for a store cost s and a gateway cost g per call. ``--workers N`` adds a
gateway with N workers (``BB_WORKERS``), which like the store's processes can use every
core.

One embedded Redis without persistence serves every cell; ``--against REV`` adds a gateway
running the package as it was at git revision REV, for a before and after in one run. Cells
are interleaved round by round. The board is written once, by this checkout: a REV that
stores notes in another layout (before the one-letter field names) reads them as missing,
so compare such a revision by a run of its own.

    python bench/read_load.py [--seconds 4] [--rounds 2] [--clients 8] [--against REV]
                              [--workers N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import re
import shutil
import sys
import time
from collections.abc import Callable
from multiprocessing.queues import Queue
from operator import itemgetter
from typing import Any

import orjson
from _harness import (
    Figures,
    bench_token,
    embedded_redis,
    revisions,
    rounds,
    scratch,
    start_bench_gateway,
    wrk,
)

from blackboard_mcp.store import Board, GetState, ListKeys, SearchKeys, UpdateState
from blackboard_mcp.testing import GatewayProcess

WORKSPACE = "readload"
READ_LINE = re.compile(r"READ ok=(\d+) error=(\d+) http_error=(\d+)")
GET_URIS = [f"bb://{WORKSPACE}/notes/n{i}" for i in range(10)]
SEARCH_WORD = "ptarmigan"

CALLS: dict[str, dict[str, Any]] = {
    "get_state 10 digests": {
        "name": "get_state",
        "arguments": {"uris": GET_URIS, "mode": "digest"},
    },
    "search_keys 1 word": {
        "name": "search_keys",
        "arguments": {"q": SEARCH_WORD},
    },
    "list_keys 20 recent": {
        "name": "list_keys",
        "arguments": {"topic": "search", "limit": 20},
    },
}


async def seed(url: str) -> None:
    board = Board.from_url(url)
    await board.start()
    for i, uri in enumerate(GET_URIS):
        await board.update_state(
            UpdateState.parse(
                {
                    "uri": uri,
                    "digest": f"Finding {i}: the cache misses rose after the deploy of build {i}.",
                    "body": "Details of the finding, with numbers and the steps to see it again. "
                    * 8,
                }
            ),
            author="seed",
        )
    for i in range(200):
        word = f" {SEARCH_WORD}" if i % 10 == 0 else ""
        await board.update_state(
            UpdateState.parse(
                {
                    "uri": f"bb://{WORKSPACE}/search/s{i}",
                    "digest": f"Note {i} on the migration plan{word}",
                    "body": f"Step {i} of the plan moves one service; "
                    f"the others wait for it.{word}",
                }
            ),
            author="seed",
        )
    await board.close()


def run_gateway(
    port: int, pid: int, token: str, call: dict[str, Any], clients: int, s: int
) -> dict[str, float]:
    payload = orjson.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
    ).decode()
    out, cpu = wrk("read_call.lua", port, token, clients, s, payload, cpu_of=pid)
    match = READ_LINE.search(out)
    if match is None:
        raise SystemExit(f"wrk printed no READ line:\n{out}")
    ok, error, http_error = map(int, match.groups())
    return {"calls": ok / s, "errors": error + http_error, "cpu_ms": 1000 * cpu / max(ok, 1)}


def _store_worker(
    url: str, tool: str, start_at: float, seconds: float, out: Queue[tuple[int, float]]
) -> None:
    async def loop() -> tuple[int, float]:
        board = Board.from_url(url)
        call: Callable[[], Any]
        if tool == "get_state":
            read = GetState.parse({"uris": GET_URIS, "mode": "digest"})
            call = lambda: board.get_state(read)  # noqa: E731
        elif tool == "search_keys":
            search = SearchKeys.parse({"q": SEARCH_WORD})
            call = lambda: board.search_keys(search, workspace=WORKSPACE)  # noqa: E731
        else:
            page = ListKeys.parse({"topic": "search", "limit": 20})
            call = lambda: board.list_keys(page, workspace=WORKSPACE)  # noqa: E731
        await call()  # connected before the window opens
        await asyncio.sleep(max(0.0, start_at - time.time()))
        calls = 0
        cpu_start = time.process_time()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await call()
            calls += 1
        cpu = time.process_time() - cpu_start
        await board.close()
        return calls, cpu

    out.put(asyncio.run(loop()))


def run_store(url: str, tool: str, clients: int, seconds: int) -> dict[str, float]:
    ctx = multiprocessing.get_context("fork")
    out: Queue[tuple[int, float]] = ctx.Queue()
    start_at = time.time() + 1.5
    procs = [
        ctx.Process(target=_store_worker, args=(url, tool, start_at, seconds, out))
        for _ in range(clients)
    ]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=60 + seconds) for _ in procs]
    for proc in procs:
        proc.join()
    calls = sum(c for c, _ in results)
    cpu = sum(c for _, c in results)
    return {"calls": calls / seconds, "errors": 0, "cpu_ms": 1000 * cpu / max(calls, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--against", metavar="REV", help="also run the gateway of git REV")
    parser.add_argument("--workers", type=int, help="also a gateway with this many workers")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    token = bench_token(workspace=WORKSPACE)
    cells: Figures[tuple[str, str], dict[str, float]] = Figures()
    with (
        scratch("bench-read-") as work,
        revisions([args.against] if args.against else []) as trees,
        embedded_redis(work / "redis", append_only=False) as server,
        contextlib.ExitStack() as running,
    ):
        asyncio.run(seed(server.url))
        gateways: dict[str, GatewayProcess] = {}

        def gateway(name: str, **options: Any) -> None:
            workdir = work / f"gw-{len(gateways)}"
            gateways[name] = running.enter_context(
                start_bench_gateway(server.url, workdir, **options)
            )

        for label, tree in trees:
            gateway("gateway" if tree is None else f"gateway @{label}", package_root=tree)
        if args.workers:
            gateway(f"gateway, {args.workers} workers", workers=args.workers)
        for round_no, order in rounds(args.rounds, list(gateways.items())):
            print(f"round {round_no}:")
            for label, call in CALLS.items():
                row: dict[str, dict[str, float]] = {}
                for name, gw in order:
                    row[name] = run_gateway(
                        gw.port, gw.pid, token, call, args.clients, args.seconds
                    )
                row["store, 8 processes"] = run_store(
                    server.url, call["name"], args.clients, args.seconds
                )
                for name, cell in row.items():
                    cells.add((label, name), cell)
                _print(label, row)
    print(f"median of {args.rounds} rounds, {args.clients} clients, {args.seconds} s per cell:")
    for label in CALLS:
        names = [n for (lab, n) in cells.cells() if lab == label]
        _print(
            label,
            {
                n: {
                    k: cells.median((label, n), itemgetter(k))
                    for k in ("calls", "errors", "cpu_ms")
                }
                for n in names
            },
        )
    failed = any(c["errors"] for cell in cells.cells() for c in cells[cell])
    return 1 if failed else 0


def _print(label: str, row: dict[str, dict[str, float]]) -> None:
    store = row["store, 8 processes"]["calls"]
    for name, cell in row.items():
        print(
            f"  {label:<22} {name:<22} {cell['calls']:>7.0f} calls/s"
            f"  CPU ms/call {cell['cpu_ms']:5.2f}  errors {cell['errors']:>3.0f}"
            f"  /store {cell['calls'] / store if store else 0:.3f}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
