"""Compare-and-swap under contention: N agent processes doing read-modify-write on shared notes.

Every process loops for a fixed window: ``get_state(mode="full")``, add one to the counter in
the body, ``update_state(expect_version=<the version read>)``; on ``Conflict`` or ``Contended``
it reads the same note again and retries, at once. Two scenarios: ``hot``, every process on one
note; ``spread``, each increment on one of 100 notes picked at random (seeded per process).
N = 1, 4, 16 and 64 processes, each with its own ``Board``, on one embedded Redis for the whole
run. The processes are started once, before the first window (from a fork server that has
already imported the store and loaded the tokenizer: fast, and the pages stay shared; or with
``--start-method spawn``), and each window opens for all of them at once: a barrier waits until
every process is connected, then they all start at the instant the parent sets.

Per cell it prints commits/s, conflicts/s (refusals the callers saw: ``Conflict`` plus
``Contended``), retries per commit (every refusal divided by the commits; p99 and max of the
refusals one increment took before it committed; the increments still being retried when the
window closed), WATCH aborts per commit (EXECs Redis refused and ``update_state`` retried
inside, invisible to callers), the fewest and most commits of one process, and LOST UPDATES:
the counters' sum in Redis minus their initial sum against the commits acknowledged to the
processes, checked note by note, with each note's version one more than its counter. Any
difference, or any other error, exits 1. Plots commits/s, conflicts/s and refusals per commit
against N to ``bench/plots/contention.png``.

    python bench/contention.py [--seconds 6] [--processes 1,4,16,64] [--notes 100]
                               [--seed 7] [--via store|gateway] [--plot PATH]

``--via gateway`` sends the same two calls as raw JSON-RPC ``tools/call`` POSTs to a
``blackboard-mcp serve`` process (one uvicorn worker, rate limit off) instead of calling the
store from each process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Literal, Protocol

import httpx
import orjson
import redis.asyncio as aioredis
from _harness import bench_token, embedded_redis, percentile, start_bench_gateway

from blackboard_mcp.store import (
    Board,
    Conflict,
    Contended,
    GetState,
    TiktokenCounter,
    UpdateState,
)
from blackboard_mcp.testing import GatewayProcess

WORKSPACE = "contention"
DIGEST = "A counter that every agent increments."
SCENARIOS: dict[str, int | None] = {"hot": 1, "spread": None}  # None: --notes
BARRIER_TIMEOUT = 120.0
RESULT_TIMEOUT = 120.0
DEFAULT_PLOT = Path(__file__).resolve().parent / "plots" / "contention.png"

Via = Literal["store", "gateway"]
Outcome = Literal["commit", "conflict", "contended"]


@dataclass(frozen=True)
class Target:
    """Where the worker sends its calls: the Redis URL, and the gateway when ``via`` says so."""

    via: Via
    redis_url: str
    gateway_url: str = ""
    token: str = ""


@dataclass(frozen=True)
class Job:
    """One cell for one process: which notes, how many processes, how long."""

    uris: tuple[str, ...]
    parties: int
    seconds: float
    seed: str


@dataclass(frozen=True)
class Gate:
    """Opens a window for N processes and the parent at once.

    A barrier per cell size (one seat for the parent), crossed twice: once when every process
    has connected, then again after the parent has written when the window opens, on the
    one monotonic clock every process of the machine shares. Synchronisation objects reach a
    spawned process only as arguments at its start, hence one barrier per size up front.
    """

    barriers: dict[int, Barrier]
    opens_at: Synchronized[float]

    def wait(self, parties: int) -> None:
        self.barriers[parties].wait(BARRIER_TIMEOUT)

    def abort(self, parties: int) -> None:
        self.barriers[parties].abort()


@dataclass
class Tally:
    """What one process did in one window."""

    commits: Counter[str] = field(default_factory=Counter)  # uri -> acknowledged increments
    conflicts: int = 0
    contended: int = 0
    retries: Counter[int] = field(default_factory=Counter)  # refusals before a commit -> count
    # Refusals already taken by an increment still being retried when the window closed.
    abandoned: list[int] = field(default_factory=list)
    late: bool = False  # woke after the window had opened
    finished: float = 0.0
    error: str = ""


class Counters(Protocol):
    """The two calls of a read-modify-write, over the store or over the gateway."""

    async def read(self, uri: str) -> tuple[int, int]:
        """The counter in the note's body and the note's version."""
        ...

    async def write(self, uri: str, value: int, expect_version: int) -> Outcome: ...

    async def close(self) -> None: ...


class StoreCounters:
    def __init__(self, redis_url: str) -> None:
        self._board = Board.from_url(redis_url)

    async def warm(self, uri: str) -> None:
        await self._board.client.ping()

    async def read(self, uri: str) -> tuple[int, int]:
        [item] = (await self._board.get_state(GetState.parse({"uris": [uri], "mode": "full"})))[
            "items"
        ]
        return int(item["body"]), int(item["version"])

    async def write(self, uri: str, value: int, expect_version: int) -> Outcome:
        try:
            await self._board.update_state(
                UpdateState.parse(
                    {
                        "uri": uri,
                        "digest": DIGEST,
                        "body": str(value),
                        "expect_version": expect_version,
                    }
                ),
                author="bench-agent",
            )
        except Conflict:
            return "conflict"
        except Contended:
            return "contended"
        return "commit"

    async def close(self) -> None:
        await self._board.close()


class GatewayCounters:
    def __init__(self, gateway_url: str, token: str) -> None:
        self._url = gateway_url + "/mcp/"
        self._http = httpx.AsyncClient(
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18",
            },
            timeout=30,
        )

    async def warm(self, uri: str) -> None:
        await self.read(uri)  # opens the keep-alive connection before the window

    async def _call(
        self, tool: str, arguments: dict[str, object]
    ) -> tuple[bool, dict[str, object]]:
        payload = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        response = await self._http.post(self._url, content=orjson.dumps(payload))
        if response.status_code != 200:
            raise RuntimeError(f"{tool}: HTTP {response.status_code}: {response.text[:300]}")
        result = orjson.loads(response.content)["result"]
        return bool(result.get("isError")), result["structuredContent"]

    async def read(self, uri: str) -> tuple[int, int]:
        failed, body = await self._call("get_state", {"uris": [uri], "mode": "full"})
        items = body.get("items")
        if failed or not isinstance(items, list):
            raise RuntimeError(f"get_state: {body}")
        return int(items[0]["body"]), int(items[0]["version"])

    async def write(self, uri: str, value: int, expect_version: int) -> Outcome:
        failed, body = await self._call(
            "update_state",
            {"uri": uri, "digest": DIGEST, "body": str(value), "expect_version": expect_version},
        )
        if not failed:
            return "commit"
        error = body.get("error")
        if not isinstance(error, dict) or error.get("code") != "conflict":
            raise RuntimeError(f"update_state: {body}")
        # Both store errors map to code "conflict"; only a stale version carries the
        # version it found, a write that lost every WATCH race does not.
        return "conflict" if "current_version" in error else "contended"

    async def close(self) -> None:
        await self._http.aclose()


async def _run_job(target: Target, job: Job, gate: Gate) -> Tally:
    counters = (
        StoreCounters(target.redis_url)
        if target.via == "store"
        else GatewayCounters(target.gateway_url, target.token)
    )
    rng = random.Random(job.seed)
    tally = Tally()
    try:
        try:
            await counters.warm(job.uris[0])
        except Exception:
            gate.abort(job.parties)  # release the others now, not at the barrier's timeout
            raise
        await asyncio.to_thread(gate.wait, job.parties)  # every process has connected
        await asyncio.to_thread(gate.wait, job.parties)  # the parent has set the opening
        start_at = gate.opens_at.value
        stop_at = start_at + job.seconds
        tally.late = time.monotonic() > start_at
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        while time.monotonic() < stop_at:
            uri = job.uris[0] if len(job.uris) == 1 else rng.choice(job.uris)
            refused = 0
            while True:
                value, version = await counters.read(uri)
                outcome = await counters.write(uri, value + 1, version)
                if outcome == "commit":
                    tally.commits[uri] += 1
                    tally.retries[refused] += 1
                    break
                refused += 1
                if outcome == "conflict":
                    tally.conflicts += 1
                else:
                    tally.contended += 1
                if time.monotonic() >= stop_at:
                    tally.abandoned.append(refused)
                    break
        tally.finished = time.monotonic()
    finally:
        await counters.close()
    return tally


def worker(target: Target, conn: Connection, gate: Gate) -> None:
    """One agent process: serve jobs from the pipe until it sends None."""
    TiktokenCounter()  # load the tokenizer (~0.3 s) now, not inside a timed window
    conn.send("ready")
    while (job := conn.recv()) is not None:
        try:
            tally = asyncio.run(_run_job(target, job, gate))
        except Exception as exc:  # reported by the parent, which then exits 1
            tally = Tally(error=f"{type(exc).__name__}: {exc}")
        conn.send(tally)


@dataclass
class Pool:
    """The agent processes, started once and reused by every cell."""

    processes: list[BaseProcess]
    pipes: list[Connection]
    gate: Gate

    @classmethod
    def start(cls, size: int, parties: Sequence[int], target: Target, method: str) -> Pool:
        context = (
            multiprocessing.get_context("forkserver")
            if method == "forkserver"
            else multiprocessing.get_context("spawn")
        )
        if method == "forkserver":
            # The fork server imports this file (and with it the store and the tokenizer, see
            # the end of the file) once; every agent is a fork of that fresh, single-threaded
            # process: no event loop or connection is inherited, and the imported pages are
            # shared until written.
            context.set_forkserver_preload([Path(__file__).stem])
            # Python 3.11's fork server ignores "__main__" in the preload list and the
            # parent's sys.path, so it finds this file by name through PYTHONPATH, set only
            # while the server starts (a failed preload would pass silently).
            saved = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(Path(__file__).resolve().parent), saved) if p
            )
            try:
                forkserver.ensure_running()
            finally:
                if saved is None:
                    del os.environ["PYTHONPATH"]
                else:
                    os.environ["PYTHONPATH"] = saved
        gate = Gate({n: context.Barrier(n + 1) for n in parties}, context.Value("d", 0.0))
        processes: list[BaseProcess] = []
        pipes: list[Connection] = []
        for _ in range(size):
            parent, child = context.Pipe()
            process = context.Process(target=worker, args=(target, child, gate), daemon=True)
            process.start()
            child.close()
            processes.append(process)
            pipes.append(parent)
        for pipe in pipes:
            if not pipe.poll(BARRIER_TIMEOUT) or pipe.recv() != "ready":
                raise RuntimeError("an agent process did not start")
        return cls(processes, pipes, gate)

    def memory_mb(self) -> float:
        """The processes' proportional set size in MB: shared pages counted once (Linux)."""
        total_kb = 0
        for process in self.processes:
            with contextlib.suppress(OSError, IndexError, ValueError):
                rollup = Path(f"/proc/{process.pid}/smaps_rollup").read_text()
                total_kb += int(rollup.split("\nPss:")[1].split()[0])
        return total_kb / 1024

    def close(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.send(None)
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
                process.join()


@dataclass(frozen=True)
class Cell:
    scenario: str
    processes: int
    seconds: float
    commits: int
    conflicts: int
    contended: int
    retries_mean: float  # every refusal, divided by the commits
    retries_p99: int  # of the increments that committed
    retries_max: int
    aborts: int  # EXECs refused by WATCH
    fewest: int
    most: int
    abandoned: int
    abandoned_max: int
    stored: int
    bad_notes: list[str]
    errors: list[str]
    late: bool

    @property
    def lost(self) -> int:
        return self.commits - self.stored

    @property
    def ok(self) -> bool:
        return self.lost == 0 and not self.bad_notes and not self.errors

    def rate(self, count: int) -> float:
        return count / self.seconds if self.seconds > 0 else 0.0


async def _exec_calls(client: aioredis.Redis[bytes]) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_exec", {}).get("calls", 0))


async def run_cell(
    board: Board,
    pool: Pool,
    *,
    scenario: str,
    n: int,
    notes: int,
    args: argparse.Namespace,
) -> Cell:
    topic = f"{scenario}-n{n}"
    uris = tuple(f"bb://{WORKSPACE}/{topic}/c{i:03d}" for i in range(notes))
    for uri in uris:
        await board.update_state(
            UpdateState.parse({"uri": uri, "digest": DIGEST, "body": "0", "expect_version": 0}),
            author="bench-setup",
        )
    execs_before = await _exec_calls(board.client)
    for index, pipe in enumerate(pool.pipes[:n]):
        pipe.send(Job(uris, n, args.seconds, f"{args.seed}-{scenario}-{n}-{index}"))
    try:
        await asyncio.to_thread(pool.gate.wait, n)
        # Slack for the scheduler to wake N processes on two cores before the window opens.
        start_at = time.monotonic() + 0.1 + 0.005 * n
        pool.gate.opens_at.value = start_at
        await asyncio.to_thread(pool.gate.wait, n)
    except threading.BrokenBarrierError:
        errors = [p.recv().error for p in pool.pipes[:n] if p.poll(5)]
        raise RuntimeError(f"{scenario} N={n}: the start barrier broke: {errors}") from None

    tallies: list[Tally] = []
    for pipe in pool.pipes[:n]:
        if not await asyncio.to_thread(pipe.poll, args.seconds + RESULT_TIMEOUT):
            raise RuntimeError(f"{scenario} N={n}: an agent process did not report")
        tallies.append(pipe.recv())
    execs = await _exec_calls(board.client) - execs_before

    acked: Counter[str] = Counter()
    retries: Counter[int] = Counter()
    for tally in tallies:
        acked.update(tally.commits)
        retries.update(tally.retries)
    commits = sum(acked.values())
    response = await board.get_state(
        GetState.parse({"uris": list(uris), "mode": "full", "budget_tokens": 100_000})
    )
    if response["truncated"] or len(response["items"]) != len(uris):
        raise RuntimeError(f"{scenario} N={n}: the final read did not return every note")
    stored = 0
    bad_notes: list[str] = []
    for item in response["items"]:
        value, version = int(item["body"]), int(item["version"])
        stored += value  # every counter started at 0
        if value != acked[item["uri"]] or version != value + 1:
            bad_notes.append(
                f"{item['uri']}: counter {value}, version {version}, "
                f"acknowledged increments {acked[item['uri']]}"
            )
    return Cell(
        scenario=scenario,
        processes=n,
        seconds=max(max(t.finished for t in tallies) - start_at, args.seconds),
        commits=commits,
        conflicts=sum(t.conflicts for t in tallies),
        contended=sum(t.contended for t in tallies),
        # Refusals spent on increments the window closed on count too: dividing only the
        # committed increments' refusals would hide the processes that starve.
        retries_mean=sum(t.conflicts + t.contended for t in tallies) / commits if commits else 0.0,
        retries_p99=int(percentile(retries.elements(), 0.99)) if retries else 0,
        retries_max=max(retries, default=0),
        # Only update_state (and link_state, not called here) runs MULTI/EXEC: reads and the
        # gateway's own bookkeeping do not, so every other EXEC was refused by WATCH.
        aborts=execs - commits,
        fewest=min(t.commits.total() for t in tallies),
        most=max(t.commits.total() for t in tallies),
        abandoned=sum(len(t.abandoned) for t in tallies),
        abandoned_max=max((r for t in tallies for r in t.abandoned), default=0),
        stored=stored,
        bad_notes=bad_notes,
        errors=[t.error for t in tallies if t.error],
        late=any(t.late for t in tallies),
    )


def _aborts_per_commit(cell: Cell) -> str:
    return f"{cell.aborts / cell.commits:.2f}" if cell.commits else "-"


def summary(cell: Cell) -> str:
    return (
        f"{cell.scenario} N={cell.processes}: {cell.rate(cell.commits):,.0f} commits/s, "
        f"{cell.rate(cell.conflicts + cell.contended):,.0f} conflicts/s "
        f"({cell.contended} Contended), {cell.retries_mean:.2f} retries/commit "
        f"(p99 {cell.retries_p99}, max {cell.retries_max}; {cell.abandoned} increments still "
        f"retrying at the close, up to {cell.abandoned_max} refusals), "
        f"{_aborts_per_commit(cell)} WATCH aborts/commit, {cell.fewest}-{cell.most} commits "
        f"per process; lost updates {cell.lost} ({cell.commits} acknowledged, "
        f"{cell.stored} in Redis)"
        + (" [A PROCESS WOKE AFTER THE WINDOW OPENED]" if cell.late else "")
    )


LEGEND = """\
commits/s, confl/s: acknowledged increments and refusals (Conflict + Contended) per second;
contd: refusals that were Contended (lost every WATCH race); retry/c: refusals per commit;
p99, max: refusals before one increment committed; open: increments still being retried when
the window closed, and the most refusals one of them took; abort/c: EXECs refused by WATCH and
retried inside update_state, per commit; min-max/proc: commits of the least and most
successful process; lost: acknowledged commits minus the increments found in Redis."""


def table(cells: Sequence[Cell]) -> str:
    header = (
        f"{'scenario':<8} {'N':>3} {'commits/s':>9} {'confl/s':>8} {'contd':>5} "
        f"{'retry/c':>7} {'p99':>4} {'max':>4} {'open':>7} {'abort/c':>7} "
        f"{'min-max/proc':>12} {'acked':>6} {'lost':>4}"
    )
    lines = [header]
    for c in cells:
        lines.append(
            f"{c.scenario:<8} {c.processes:>3} {c.rate(c.commits):>9,.0f} "
            f"{c.rate(c.conflicts + c.contended):>8,.0f} {c.contended:>5} "
            f"{c.retries_mean:>7.2f} {c.retries_p99:>4} {c.retries_max:>4} "
            f"{f'{c.abandoned}/{c.abandoned_max}':>7} {_aborts_per_commit(c):>7} "
            f"{f'{c.fewest}-{c.most}':>12} {c.commits:>6} {c.lost:>4}"
        )
    return "\n".join([*lines, "", LEGEND])


def plot(cells: Sequence[Cell], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    panels: list[tuple[str, Callable[[Cell], float]]] = [
        ("commits/s", lambda c: c.rate(c.commits)),
        ("conflicts/s", lambda c: c.rate(c.conflicts + c.contended)),
        ("refusals per commit", lambda c: c.retries_mean),
    ]
    for ax, (label, value) in zip(axes, panels, strict=True):
        for scenario, style in (("hot", "o-"), ("spread", "s--")):
            row = [c for c in cells if c.scenario == scenario]
            ax.plot([c.processes for c in row], [value(c) for c in row], style, label=scenario)
        ax.set_xscale("log", base=2)
        if label == "commits/s" and all(value(c) > 0 for c in cells):
            ax.set_yscale("log")  # the hot note falls by orders of magnitude
        ticks = sorted({c.processes for c in cells})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("agent processes (N)")
        ax.set_title(label)
        ax.grid(True, alpha=0.3)
        ax.legend()
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


async def run(args: argparse.Namespace) -> int:
    counts: list[int] = args.processes
    cells: list[Cell] = []
    with embedded_redis() as server:
        board = Board.from_url(server.url)
        await board.start()
        gateway: GatewayProcess | None = None
        target = Target(via="store", redis_url=server.url)
        if args.via == "gateway":
            gateway = start_bench_gateway(server.url)
            target = Target(
                "gateway",
                server.url,
                gateway_url=gateway.url,
                token=bench_token(workspace=WORKSPACE),
            )
        t0 = time.perf_counter()
        pool = Pool.start(max(counts), counts, target, args.start_method)
        print(
            f"via {args.via}; {max(counts)} agent processes started ({args.start_method}) in "
            f"{time.perf_counter() - t0:.1f}s ({pool.memory_mb():,.0f} MB PSS); "
            f"{args.seconds:g}s per cell; "
            f"{os.cpu_count()} cores, Redis and agents on one machine",
            flush=True,
        )
        try:
            for scenario, size in SCENARIOS.items():
                for n in counts:
                    cell = await run_cell(
                        board,
                        pool,
                        scenario=scenario,
                        n=n,
                        notes=size or args.notes,
                        args=args,
                    )
                    cells.append(cell)
                    print(summary(cell), flush=True)
        finally:
            pool.close()
            if gateway is not None:
                gateway.stop()
            await board.close()

    print()
    print(table(cells))
    title = (
        f"read-modify-write with expect_version via {args.via}: hot = 1 note, "
        f"spread = {args.notes} notes; {args.seconds:g}s per cell, {os.cpu_count()} cores"
    )
    plot(cells, args.plot, title)
    print(f"\nplot: {args.plot}")
    failed = [c for c in cells if not c.ok]
    for cell in failed:
        for line in [*cell.errors, *cell.bad_notes[:10]]:
            print(f"FAILED {cell.scenario} N={cell.processes}: {line}", file=sys.stderr)
    if failed:
        print(f"FAILED: {len(failed)} cell(s) lost or invented updates, or errors", file=sys.stderr)
        return 1
    print("lost updates: 0 in every cell")
    return 0


def _counts(text: str) -> list[int]:
    counts = sorted({int(part) for part in text.split(",") if part.strip()})
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError("a comma-separated list of positive integers")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=6.0, help="timed window per cell")
    parser.add_argument("--processes", type=_counts, default=[1, 4, 16, 64])
    parser.add_argument("--notes", type=int, default=100, help="notes in the spread scenario")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--via", choices=["store", "gateway"], default="store")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    parser.add_argument(
        "--start-method",
        choices=["forkserver", "spawn"],
        default="forkserver",
        help="how agent processes start (spawn: each imports everything itself, slower)",
    )
    args = parser.parse_args()
    sys.exit(asyncio.run(run(args)))


if __name__ != "__main__":
    # Imported by an agent process (spawn) or by the fork server: load the tokenizer (~0.3 s,
    # ~40 MB) now, and with a fork server once for every agent.
    TiktokenCounter()

if __name__ == "__main__":
    main()
