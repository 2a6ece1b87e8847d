"""What every bench script shares: one embedded Redis, the gateways and git revisions it puts
side by side, rounds that interleave its cells, and the figures taken from them.

A cell is one thing measured (a path, a gateway, a revision, a listener count); a round
measures every cell once. Rounds interleave the cells, so a slow spell of the machine falls on
all of them alike, and each cell's figure is the median over the rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import httpx
import orjson
import redis
from _rawhttp import process_tree_cpu_seconds

from blackboard_mcp.auth import TokenIssuer, load_signing_keys
from blackboard_mcp.store import EmbeddedRedis, free_port
from blackboard_mcp.testing import GatewayProcess, start_gateway, wait_until_answering

BENCH = Path(__file__).resolve().parent
CHECKOUT = BENCH.parent
THIS_CHECKOUT = "this checkout"
BENCH_SECRET = "bench-secret-" + "b" * 40

Cell = TypeVar("Cell")
Figure = TypeVar("Figure")


# --- figures ------------------------------------------------------------------------------------


def median(values: Iterable[float]) -> float:
    return statistics.median(values)


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0.99 for p99); NaN when there are no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@dataclass(frozen=True)
class Timed:
    """Calls made over a window: how many, how long it took, each call's latency (seconds)."""

    latencies: Sequence[float]
    elapsed: float

    @property
    def calls(self) -> int:
        return len(self.latencies)

    @property
    def rate(self) -> float:
        return self.calls / self.elapsed if self.elapsed > 0 else 0.0

    def ms(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000

    @property
    def p50_ms(self) -> float:
        return median(self.latencies) * 1000

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.latencies) * 1000


async def concurrently(
    call: Callable[[int, int], Awaitable[object]], clients: int, seconds: float
) -> Timed:
    """``clients`` callers each calling ``call(client, n)`` one call after another for
    ``seconds``."""
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def client(number: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            began = time.perf_counter()
            await call(number, n)
            latencies.append(time.perf_counter() - began)
            n += 1

    began = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    return Timed(latencies, time.perf_counter() - began)


def random_text(rng: random.Random, size: int, words: Sequence[str]) -> str:
    """``size`` characters of ``words`` drawn by ``rng``, a space between each two."""
    drawn: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(words)
        drawn.append(word)
        length += len(word) + 1
    return " ".join(drawn)[:size]


def revision_table(
    measured: Figures[tuple[str, str], dict[str, float]],
    cells: Sequence[str],
    labels: Sequence[str],
    columns: Sequence[tuple[str, str, str]],
    *,
    against_this: str | None = None,
) -> list[str]:
    """Lines of a table, a row per cell and revision: each of ``columns`` (heading, figure,
    format spec) the median of that figure over the rounds; with ``against_this``, a last
    column of that figure's median over this checkout's."""
    width = max(len("cell"), *(len(c) for c in cells))
    widths = [max(len(heading), 8) for heading, _, _ in columns]
    head = f"{'cell':<{width}} {'revision':<14}"
    head += "".join(f" {h:>{w}}" for (h, _, _), w in zip(columns, widths, strict=True))
    lines = [head + (f" {'/ this':>8}" if against_this else "")]
    for cell in cells:
        for label in labels:
            line = f"{cell:<{width}} {label:<14}"
            for (_, figure, spec), w in zip(columns, widths, strict=True):
                line += f" {measured.median((label, cell), lambda f, k=figure: f[k]):>{w}{spec}}"
            if against_this:
                mine = measured.median((label, cell), lambda f: f[against_this])
                base = measured.median((THIS_CHECKOUT, cell), lambda f: f[against_this])
                line += f" {mine / base:>8.2f}"
            lines.append(line)
    return lines


# --- load through a gateway ---------------------------------------------------------------------


def wrk(
    script: str, port: int, token: str, clients: int, seconds: int, *args: str, cpu_of: int
) -> tuple[str, float]:
    """``wrk`` (a C load generator, one connection per thread) running the bench's Lua
    ``script`` with ``args`` against the gateway on ``port`` for whole ``seconds``: what it
    printed, and the CPU seconds the process tree of ``cpu_of`` spent meanwhile."""
    command = [
        "wrk", f"-t{clients}", f"-c{clients}", f"-d{seconds}s",
        "-H", f"Authorization: Bearer {token}",
        "-s", str(BENCH / script), f"http://127.0.0.1:{port}/mcp/", "--", *args,
    ]  # fmt: skip
    cpu_before = process_tree_cpu_seconds(cpu_of)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    cpu = process_tree_cpu_seconds(cpu_of) - cpu_before
    if done.returncode != 0:
        raise SystemExit(f"wrk failed: {done.stderr}{done.stdout}")
    return done.stdout, cpu


# --- cells and rounds ---------------------------------------------------------------------------


def rounds(count: int, cells: Sequence[Cell]) -> Iterator[tuple[int, list[Cell]]]:
    """Each round's number (from 1) and the order to measure its cells in: every other round
    the other way round, so no cell always follows the same one (the cell measured right after
    a heavy one comes out slower)."""
    for number in range(1, count + 1):
        yield number, list(cells) if number % 2 else list(reversed(cells))


class Figures(Generic[Cell, Figure]):
    """Each cell's figures, one a round, in the order the cells were first measured."""

    def __init__(self) -> None:
        self._by_cell: dict[Cell, list[Figure]] = {}

    def add(self, cell: Cell, figure: Figure) -> Figure:
        self._by_cell.setdefault(cell, []).append(figure)
        return figure

    def __getitem__(self, cell: Cell) -> list[Figure]:
        return self._by_cell[cell]

    def cells(self) -> list[Cell]:
        return list(self._by_cell)

    def latest(self) -> dict[Cell, Figure]:
        """Each cell's figure from the last round that measured it."""
        return {cell: figures[-1] for cell, figures in self._by_cell.items()}

    def median(self, cell: Cell, of: Callable[[Figure], float | None]) -> float:
        """The median of ``of`` over the cell's rounds, leaving out the rounds it says None for;
        NaN when it says None for all."""
        values = [v for v in map(of, self._by_cell[cell]) if v is not None]
        return median(values) if values else math.nan

    def middle(self, cell: Cell, by: Callable[[Figure], float]) -> Figure:
        """The cell's round whose ``by`` is the median one: its other figures stay together."""
        measured = sorted(self._by_cell[cell], key=by)
        return measured[len(measured) // 2]


# --- one embedded Redis -------------------------------------------------------------------------


@contextlib.contextmanager
def scratch(prefix: str = "bench-") -> Iterator[Path]:
    """A temporary folder for the run, removed at its end (if what ran in it has not)."""
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as folder:
        yield Path(folder)


@contextlib.contextmanager
def embedded_redis(
    data_dir: Path | None = None,
    *,
    appendfsync: Literal["everysec", "always"] = "everysec",
    append_only: bool = True,
) -> Iterator[EmbeddedRedis]:
    """The run's Redis Stack, in ``data_dir`` (a temporary folder when None), stopped at the end.

    ``append_only=False`` turns the append-only file off once it runs: the workload's own cost,
    not the disk's (the embedded default is AOF everysec)."""
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(scratch("bench-redis-"))
        server = stack.enter_context(EmbeddedRedis(data_dir=data_dir, appendfsync=appendfsync))
        if not append_only:
            with redis.Redis.from_url(server.url) as client:
                client.config_set("appendonly", "no")
        yield server


# --- gateways, tokens, revisions ----------------------------------------------------------------


def start_bench_gateway(
    redis_url: str,
    workdir: Path | None = None,
    *,
    workers: int = 1,
    extra_env: dict[str, str] | None = None,
    package_root: Path | None = None,
) -> GatewayProcess:
    """A gateway as every bench runs it: the rate limit off (a bench is one subject making
    thousands of calls a minute), warnings only, and the bench's signing secret. It is a
    context manager too, stopped at the end of a ``with`` block."""
    return start_gateway(
        redis_url,
        workdir,
        workers=workers,
        extra_env={"BB_RATE_LIMIT_PER_MINUTE": "0", **(extra_env or {})},
        package_root=package_root,
        jwt_secret=BENCH_SECRET,
        log_level="WARNING",
    )


def bench_issuer(secret: str = BENCH_SECRET) -> TokenIssuer:
    signing, _ = load_signing_keys(secret=secret)
    assert signing is not None
    return TokenIssuer(signing_key=signing, issuer="blackboard-mcp", audience="blackboard-mcp")


def bench_token(
    *,
    workspace: str,
    subject: str = "bench",
    capabilities: Sequence[str] = ("board_read", "board_write"),
    ttl_seconds: int = 6 * 3600,
    issuer: TokenIssuer | None = None,
) -> str:
    """A token for every topic of ``workspace``."""
    return (issuer or bench_issuer()).issue(
        subject=subject,
        workspace=workspace,
        read=["*"],
        write=["*"],
        capabilities=list(capabilities),
        ttl_seconds=ttl_seconds,
    )


MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


def mcp_headers(token: str) -> dict[str, str]:
    """What a 2025-06-18 client sends with each request."""
    return {"Authorization": f"Bearer {token}", **MCP_HEADERS}


def post_mcp(
    http: httpx.Client, url: str, token: str, method: str, params: dict[str, Any] | None = None
) -> Any:
    """One JSON-RPC request as a 2025-06-18 client sends it; the ``result`` of its answer."""
    response = http.post(
        url,
        headers=mcp_headers(token),
        content=orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}),
    )
    return response.json()["result"]


def extract_revision(rev: str, into: Path) -> None:
    """The package as it was at git revision ``rev``, under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(CHECKOUT), "archive", rev, "blackboard_mcp"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


@contextlib.contextmanager
def revisions(against: Sequence[str]) -> Iterator[list[tuple[str, Path | None]]]:
    """(label, package root) for this checkout (None: the installed package), then for each
    revision of ``against``, its package extracted into a folder removed at the end."""
    with scratch("bench-trees-") as trees:
        found: list[tuple[str, Path | None]] = [(THIS_CHECKOUT, None)]
        for rev in against:
            tree = trees / rev.replace("/", "_")
            tree.mkdir()
            extract_revision(rev, tree)
            found.append((rev, tree))
        yield found


def run_in_revision(package_root: Path | None, code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` (``python -c``) with ``args`` on the package of ``package_root`` (this
    checkout's when None); the JSON object its last output line prints."""
    env = dict(os.environ)
    if package_root is not None:
        env["PYTHONPATH"] = str(package_root)
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=package_root or CHECKOUT,
    )
    if out.returncode != 0:
        raise SystemExit(f"the run on {package_root or CHECKOUT} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def each_revision(against: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(label, MCP URL) for this checkout, then for each revision of ``against``: a gateway on
    an embedded Redis of its own, both stopped before the next starts. For benches that compare
    what each revision answers, not how fast."""
    with revisions(against) as found, scratch("bench-revisions-") as work:
        for n, (label, tree) in enumerate(found):
            with (
                embedded_redis(work / f"redis-{n}") as server,
                start_bench_gateway(server.url, work / f"gw-{n}", package_root=tree) as gateway,
            ):
                yield label, f"{gateway.url}/mcp"


@contextlib.contextmanager
def script_server(
    script: str, *args: str, name: str, timeout: float = 30.0
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Run the bench's ``script`` with a free port as its first argument; the process and the
    port once something listens on it, stopped at the end of the block."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(BENCH / script), str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    try:
        wait_until_answering(process, listening, name=name, timeout=timeout)
        yield process, port
    finally:
        process.terminate()
        process.wait(timeout=30)
