"""Compare-and-swap writes through the gateway against bare redis-py CAS, side by side.

The workload agents send: each of 8 clients rewrites its own note with ``expect_version`` set
to the version it last got back and a new digest and body every time. Through the gateway
the clients are ``wrk`` connections running ``bench/cas_update.lua`` (a C load generator,
so the client costs little of the machine's two cores), one connection per wrk thread. The
reference is bare redis-py: 8 processes, each looping WATCH/GET/MULTI/SET/INCR/EXEC on its
own key, with hiredis (and with redis-py's pure-Python RESP3 parser, passed as its
``parser_class``, with ``--pure-parser``). Since every client owns its note, real CAS must
succeed nearly always: conflicts and errors are counted and any error exits 1.

One embedded Redis without persistence (appendonly off) serves every cell. The gateway (one
uvicorn worker) runs on it as installed; each ``--against REV`` adds a gateway running the
package as it was at git revision REV (extracted with ``git archive`` and run from there), so
a change's before and after are measured in one run (the gateways' order alternates round by
round); ``--pure-parser`` adds the bare arm with redis-py's pure-Python RESP parser. (A
gateway without hiredis no longer exists: the store's own connection, ``store/connection/_wire.py``,
parses with ``hiredis.Reader``, so hiredis is a hard dependency.) The cells are interleaved
round by round, since this shared machine drifts.

A third kind of cell is the floor (``bench/_cas_floor_server.py``): uvicorn with the
gateway's server settings and an ASGI app that sends Redis exactly the store's commands for
the write, in the same two round trips, and does nothing else (no token, no validation, no
token counting, no audit). It says how much of the gap to bare redis-py is the HTTP server
and the Redis work themselves, which no gateway can shed. ``--workers N`` (repeatable) adds a
gateway with N uvicorn workers (``BB_WORKERS``). ``--socket`` adds a gateway and bare
redis-py that reach Redis by its Unix socket, as ``serve`` runs its workers on the embedded
Redis (the other cells use TCP over loopback, as a Redis of its own host is reached).

    python bench/cas_load.py [--seconds 4] [--rounds 2] [--clients 8] [--against REV]...
                             [--pure-parser] [--workers N]... [--socket]

Prints, per round, writes/s of each cell, the gateway's CPU ms per write, Redis's own CPU ms
and network bytes (in and out, every connection) per write, and the ratio gateway/bare (bare
with hiredis); then the median of the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import httpx
import orjson
import redis
from _harness import (
    Figures,
    bench_token,
    embedded_redis,
    mcp_headers,
    revisions,
    rounds,
    scratch,
    script_server,
    start_bench_gateway,
    wrk,
)
from redis._parsers import _RESP3Parser

WORKSPACE = "casload"
BARE = "bare redis-py CAS, hiredis"
SOCKET_GATEWAY = "gateway by the Unix socket, hiredis"
SOCKET_BARE = "bare redis-py CAS by the Unix socket, hiredis"
BARE_PURE = "bare redis-py CAS, pure-Python"
FLOOR = "floor: HTTP + the Redis commands, hiredis"
CAS_LINE = re.compile(r"CAS ok=(\d+) conflict=(\d+) error=(\d+) http_error=(\d+)")


@dataclass(frozen=True)
class Cell:
    writes_per_s: float
    conflicts: int = 0
    errors: int = 0
    cpu_ms_per_write: float | None = None
    redis_cpu_ms_per_write: float | None = None
    redis_bytes_per_write: float | None = None


@dataclass(frozen=True)
class RedisUse:
    """Redis's own CPU seconds (INFO cpu, its main and background threads) and the bytes it
    read and wrote on its connections (INFO stats): what a cell cost the store itself."""

    cpu_seconds: float
    net_bytes: int

    @staticmethod
    def now(client: redis.Redis[bytes]) -> RedisUse:
        cpu, stats = client.info("cpu"), client.info("stats")
        return RedisUse(
            cpu_seconds=float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
            net_bytes=int(stats["total_net_input_bytes"]) + int(stats["total_net_output_bytes"]),
        )

    def per_write(self, since: RedisUse, writes: int) -> tuple[float | None, float | None]:
        """CPU ms and bytes per write between ``since`` and this reading."""
        if not writes:
            return None, None
        return (
            1000 * (self.cpu_seconds - since.cpu_seconds) / writes,
            (self.net_bytes - since.net_bytes) / writes,
        )


def _call(client: httpx.Client, port: int, arguments: dict[str, object]) -> dict[str, object]:
    payload = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "update_state", "arguments": arguments},
    }
    response = client.post(f"http://127.0.0.1:{port}/mcp/", content=orjson.dumps(payload))
    result = orjson.loads(response.content)["result"]
    if result.get("isError"):
        raise SystemExit(f"seeding failed: {result}")
    content: dict[str, object] = result["structuredContent"]
    return content


def seed(port: int, token: str, tag: str, clients: int) -> list[int]:
    """Create the clients' notes; returns their versions."""
    with httpx.Client(headers=mcp_headers(token), timeout=30) as client:
        versions = []
        for i in range(1, clients + 1):
            uri = f"bb://{WORKSPACE}/{tag}/c{i}"
            reply = _call(client, port, {"uri": uri, "digest": "seed", "body": "seed"})
            versions.append(int(str(reply["version"])))
        return versions


def run_gateway(
    port: int, pid: int, token: str, tag: str, clients: int, seconds: int, store: redis.Redis[bytes]
) -> Cell:
    versions = seed(port, token, tag, clients)
    before = RedisUse.now(store)
    out, cpu = wrk(
        "cas_update.lua", port, token, clients, seconds,
        WORKSPACE, tag, ",".join(map(str, versions)), cpu_of=pid,
    )  # fmt: skip
    match = CAS_LINE.search(out)
    if match is None:
        raise SystemExit(f"wrk printed no CAS line:\n{out}")
    ok, conflict, error, http_error = map(int, match.groups())
    redis_cpu, redis_bytes = RedisUse.now(store).per_write(before, ok)
    return Cell(
        writes_per_s=ok / seconds,
        conflicts=conflict,
        errors=error + http_error,
        cpu_ms_per_write=1000 * cpu / ok if ok else None,
        redis_cpu_ms_per_write=redis_cpu,
        redis_bytes_per_write=redis_bytes,
    )


def _bare_worker(
    url: str, key: str, start_at: float, seconds: float, pure: bool, out: Queue[int]
) -> None:
    # redis-py speaks RESP3 here; with hiredis importable it parses with it unless told not to.
    client = redis.Redis.from_url(url, **({"parser_class": _RESP3Parser} if pure else {}))
    client.ping()
    commits = 0
    time.sleep(max(0.0, start_at - time.time()))
    end = time.monotonic() + seconds
    with client.pipeline() as pipe:
        while time.monotonic() < end:
            try:
                pipe.watch(key)
                pipe.get(key)
                pipe.multi()
                pipe.set(key, f"step {commits} of {key}: a new body every time")
                pipe.incr(key + ":v")
                pipe.execute()
                commits += 1
            except redis.WatchError:
                pass
            finally:
                pipe.reset()
    out.put(commits)


def run_bare(
    url: str, tag: str, clients: int, seconds: int, store: redis.Redis[bytes], *, pure: bool
) -> Cell:
    ctx = multiprocessing.get_context("fork")
    out: Queue[int] = ctx.Queue()
    start_at = time.time() + 1.0  # every process connected before the window opens
    procs = [
        ctx.Process(
            target=_bare_worker, args=(url, f"bare:{tag}:{i}", start_at, seconds, pure, out)
        )
        for i in range(clients)
    ]
    before = RedisUse.now(store)
    for proc in procs:
        proc.start()
    commits = sum(out.get(timeout=60 + seconds) for _ in procs)
    # Read before the joins: the processes' exits add nothing, but the reading must not
    # include another cell's start either.
    redis_cpu, redis_bytes = RedisUse.now(store).per_write(before, commits)
    for proc in procs:
        proc.join()
    return Cell(
        writes_per_s=commits / seconds,
        redis_cpu_ms_per_write=redis_cpu,
        redis_bytes_per_write=redis_bytes,
    )


def _hiredis_available() -> bool:
    import redis.utils

    return bool(redis.utils.HIREDIS_AVAILABLE)


def _loads_hiredis(pid: int) -> bool:
    """Whether the process has hiredis's extension mapped: proof of which parser it runs."""
    return "hiredis" in Path(f"/proc/{pid}/maps").read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=4)  # wrk takes whole seconds
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--against",
        metavar="REV",
        action="append",
        default=[],
        help="also run the gateway of git REV (repeatable)",
    )
    parser.add_argument(
        "--pure-parser", action="store_true", help="also bare redis-py without hiredis"
    )
    parser.add_argument(
        "--socket",
        action="store_true",
        help="also a gateway and bare redis-py on Redis's Unix socket (as `serve` runs them)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        action="append",
        default=[],
        help="also a gateway with this many uvicorn workers (repeatable: --workers 2 --workers 4)",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    if not _hiredis_available():
        raise SystemExit("hiredis is not installed: pip install the package's dependencies")
    seconds = args.seconds
    token = bench_token(workspace=WORKSPACE)
    cells: Figures[str, Cell] = Figures()
    with (
        scratch("bench-cas-") as work,
        revisions(args.against) as trees,
        embedded_redis(work / "redis", append_only=False) as server,
        contextlib.ExitStack() as running,
        redis.Redis.from_url(server.url) as store,
    ):
        gateways: dict[str, tuple[subprocess.Popen[bytes], int]] = {}

        def gateway(name: str, url: str = server.url, **options: Any) -> None:
            workdir = work / f"gw-{len(gateways)}"
            process = running.enter_context(start_bench_gateway(url, workdir, **options))
            gateways[name] = (process.process, process.port)

        for label, tree in trees:
            gateway(f"gateway{'' if tree is None else f' @{label}'}, hiredis", package_root=tree)
        for count in args.workers:
            gateway(f"gateway, {count} workers, hiredis", workers=count)
        if args.socket:
            gateway(SOCKET_GATEWAY, url=server.local_url)
        gateways[FLOOR] = running.enter_context(
            script_server("_cas_floor_server.py", server.url, name="the floor server")
        )
        bare_cells = [
            (BARE, server.url, False),
            *([(BARE_PURE, server.url, True)] if args.pure_parser else []),
            *([(SOCKET_BARE, server.local_url, False)] if args.socket else []),
        ]
        for name, (proc, _) in gateways.items():
            if "workers" in name:
                continue  # the supervisor process; its workers are its children
            if _loads_hiredis(proc.pid) != ("hiredis" in name.split(",")[-1]):
                raise SystemExit(f"{name}: the gateway does not run the parser it names")
        # The order alternates: with a fixed one, the gateway measured right after the bare
        # cell's 8 processes came out slower round after round.
        for round_no, order in rounds(args.rounds, list(enumerate(gateways.items()))):
            for number, (name, (proc, port)) in order:
                tag = f"r{round_no}-g{number}"
                cells.add(
                    name, run_gateway(port, proc.pid, token, tag, args.clients, seconds, store)
                )
            for number, (name, url, pure) in enumerate(bare_cells):
                tag = f"r{round_no}-b{number}"
                cells.add(name, run_bare(url, tag, args.clients, seconds, store, pure=pure))
            print(f"round {round_no}:")
            _print_round(cells.latest())
    print(f"median of {args.rounds} rounds, {args.clients} clients, {seconds:g} s per cell:")
    _print_round(
        {
            name: Cell(
                writes_per_s=cells.median(name, lambda c: c.writes_per_s),
                conflicts=sum(c.conflicts for c in cells[name]),
                errors=sum(c.errors for c in cells[name]),
                cpu_ms_per_write=_or_none(cells.median(name, lambda c: c.cpu_ms_per_write)),
                redis_cpu_ms_per_write=_or_none(
                    cells.median(name, lambda c: c.redis_cpu_ms_per_write)
                ),
                redis_bytes_per_write=_or_none(
                    cells.median(name, lambda c: c.redis_bytes_per_write)
                ),
            )
            for name in cells.cells()
        }
    )
    failed = any(c.errors for name in cells.cells() for c in cells[name])
    return 1 if failed else 0


def _figure(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


def _print_round(row: dict[str, Cell]) -> None:
    bare = row[BARE].writes_per_s
    for name, cell in row.items():
        cpu = _figure(cell.cpu_ms_per_write, ".2f")
        redis_cpu = _figure(cell.redis_cpu_ms_per_write, ".3f")
        redis_bytes = _figure(cell.redis_bytes_per_write, ".0f")
        ratio = cell.writes_per_s / bare if bare else 0.0
        print(
            f"  {name:<42} {cell.writes_per_s:>8.0f} writes/s  gateway CPU ms/write {cpu:>5}"
            f"  Redis CPU ms/write {redis_cpu:>5}  Redis bytes/write {redis_bytes:>5}"
            f"  conflicts {cell.conflicts:>3}  errors {cell.errors:>3}  /bare {ratio:.3f}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
