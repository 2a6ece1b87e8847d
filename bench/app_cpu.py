"""What the gateway's app costs a call without an HTTP server: this checkout against revisions.

Through HTTP the figures of a change of a few microseconds drown in the machine's noise (the
HTTP server, the kernel's socket work and the load generator share the cores with the app).
Here each revision's app, built as ``serve`` builds it (``create_app(gateway_parts(...))``,
its lifespan entered, the rate limit off as in every bench), is called in its own process as
an ASGI application, with the requests a 2025-06-18 client sends (``tools/call`` over the
direct path, a bearer token, the MCP headers), by 8 tasks on one uvloop event loop, against
one embedded Redis without persistence. Everything the app does for a call is measured: the
edge's checks, the token, the typed request, scope and admission, the store's round trips,
audit, metrics and the JSON answer. Only the HTTP server's parsing and the client's socket
are not. Each revision runs in a process of its own (``PYTHONPATH`` at the revision's package,
extracted with ``git archive``); rounds alternate the revisions' order.

Cells: ``cas`` (each task rewrites its own note with the version it last got back),
``create`` (each task writes new notes), ``get`` (get_state of 10 digests), ``list``
(list_keys of 20, most recent first).

    python bench/app_cpu.py [--seconds 4] [--rounds 3] [--cell cas]... [--against REV]...

Prints calls/s and process CPU ms per call of each cell and revision (median of the rounds),
and each revision's CPU per call against this checkout's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _harness import (
    BENCH_SECRET,
    Figures,
    embedded_redis,
    revision_table,
    revisions,
    rounds,
    run_in_revision,
    scratch,
)

CELLS = ("cas", "create", "get", "list")
TASKS = 8

# Runs inside each revision's process: builds the app, seeds its notes, loops one cell.
_WORKER = r"""
import asyncio, itertools, json, resource, sys, time
from pathlib import Path

import orjson, uvloop
from blackboard_mcp._composition import gateway_parts
from blackboard_mcp.auth import TokenIssuer, load_signing_keys
from blackboard_mcp.gateway import create_app
from blackboard_mcp.settings import Settings

url, work, secret, ws, cell = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
seconds, tasks = float(sys.argv[6]), int(sys.argv[7])

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

async def main():
    (work / "sources").mkdir(parents=True, exist_ok=True)
    settings = Settings(redis_url=url, jwt_secret=secret, data_dir=work / "data",
                        source_root=work / "sources", rate_limit_per_minute=0)
    app = create_app(gateway_parts(settings))
    signing, _ = load_signing_keys(secret=secret)
    token = TokenIssuer(signing_key=signing, issuer="blackboard-mcp",
                        audience="blackboard-mcp").issue(
        subject="bench", workspace=ws, read=["*"], write=["*"],
        capabilities=["board_read", "board_write"], ttl_seconds=3600)
    headers = [(b"host", b"127.0.0.1:8765"), (b"authorization", f"Bearer {token}".encode()),
               (b"content-type", b"application/json"),
               (b"accept", b"application/json, text/event-stream"),
               (b"mcp-protocol-version", b"2025-06-18")]
    ids = itertools.count(1)

    async def call(tool, arguments):
        body = orjson.dumps({"jsonrpc": "2.0", "id": next(ids), "method": "tools/call",
                             "params": {"name": tool, "arguments": arguments}})
        answer, pending = [], [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if pending:
                return pending.pop()
            await asyncio.Event().wait()

        async def send(message):
            if message["type"] == "http.response.body":
                answer.append(message.get("body", b""))

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": "/mcp/", "raw_path": b"/mcp/",
                 "query_string": b"", "root_path": "", "headers": headers,
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8765)}
        await app(scope, receive, send)
        result = orjson.loads(b"".join(answer))["result"]
        if result["isError"]:
            raise SystemExit(f"{tool} answered an error: {result['structuredContent']}")
        return result["structuredContent"]

    async with app.router.lifespan_context(app):
        versions = {}
        for t in range(tasks):
            written = await call("update_state", {"uri": f"bb://{ws}/cas/n{t}", "digest": "d",
                                                  "body": "b"})
            versions[t] = written["version"]
        for i in range(20):
            await call("update_state", {"uri": f"bb://{ws}/read/n{i}",
                                        "digest": f"finding {i} of the read set",
                                        "body": "word " * 40})
        counted, stop = [0], [False]

        async def loop(t):
            step = 0
            while not stop[0]:
                step += 1
                if cell == "cas":
                    written = await call("update_state", {
                        "uri": f"bb://{ws}/cas/n{t}", "expect_version": versions[t],
                        "digest": f"Status of worker {t}, step {step}: {100000 - step} left.",
                        "body": f"Step {step} of worker {t} rewrote this note; the next step "
                                f"reads it and rewrites it with {step * 7} findings so far."})
                    versions[t] = written["version"]
                elif cell == "create":
                    await call("update_state", {
                        "uri": f"bb://{ws}/new/w{t}-{step}-{time.monotonic_ns()}",
                        "digest": f"Finding {step} of worker {t}.",
                        "body": f"Worker {t} found item {step * 7}."})
                elif cell == "get":
                    await call("get_state", {"uris": [f"bb://{ws}/read/n{i}" for i in range(10)]})
                else:
                    await call("list_keys", {"topic": "read", "limit": 20})
                counted[0] += 1

        warm = [asyncio.create_task(loop(t)) for t in range(tasks)]
        await asyncio.sleep(min(1.0, seconds / 4))
        stop[0] = True
        await asyncio.gather(*warm)
        stop[0], counted[0] = False, 0
        used, began = cpu(), time.perf_counter()
        running = [asyncio.create_task(loop(t)) for t in range(tasks)]
        await asyncio.sleep(seconds)
        stop[0] = True
        await asyncio.gather(*running)
        elapsed, used = time.perf_counter() - began, cpu() - used
    print(json.dumps({"calls_per_s": counted[0] / elapsed, "cpu_ms": 1000 * used / counted[0]}))

uvloop.run(main())
"""


def run_cell(
    url: str, tree: Path | None, work: Path, label: str, cell: str, seconds: float, round_: int
) -> dict[str, float]:
    tag = "".join(c for c in label.lower() if c.isalnum())[:12]
    ws = f"bench-{tag}-{cell}-{round_}"
    folder = work / ws
    return run_in_revision(
        tree, _WORKER, url, str(folder), BENCH_SECRET, ws, cell, str(seconds), str(TASKS)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    parser.add_argument(
        "--cell", action="append", choices=CELLS, help="measure only this cell (repeatable)"
    )
    args = parser.parse_args()
    cells = tuple(args.cell or CELLS)
    started = time.strftime("%Y-%m-%d %H:%M")
    measured: Figures[tuple[str, str], dict[str, float]] = Figures()
    with (
        revisions(args.against) as trees,
        embedded_redis(append_only=False) as redis,
        scratch("bench-app-") as work,
    ):
        for number, order in rounds(args.rounds, trees):
            for cell in cells:
                for label, tree in order:
                    result = run_cell(redis.url, tree, work, label, cell, args.seconds, number)
                    measured.add((label, cell), result)
                    print(
                        f"  round {number} {cell:<7} {label:<14} {result['calls_per_s']:>7.0f}/s "
                        f"{result['cpu_ms']:.3f} ms",
                        flush=True,
                    )
    print(
        f"the app called as ASGI in process, {TASKS} tasks; {args.seconds:g} s per cell, median "
        f"of {args.rounds} rounds, revisions' order alternating; started {started}"
    )
    columns = [("calls/s", "calls_per_s", ".0f"), ("CPU ms/call", "cpu_ms", ".3f")]
    labels = [label for label, _ in trees]
    print("\n".join(revision_table(measured, cells, labels, columns, against_this="cpu_ms")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
