"""blackboard-mcp side by side with the reference MCP memory server, in one run.

The reference is the npm package `@modelcontextprotocol/server-memory`: a knowledge graph kept in
one JSONL file (MEMORY_FILE_PATH), one stdio server process per agent. Several agents share that
board by pointing their own server processes at the same file. blackboard-mcp is one gateway
(Streamable HTTP, embedded Redis) that every agent talks to. Both are driven through the official
Python MCP client (stdio client / Streamable HTTP client), from separate writer processes.

What it measures:

1. Lost writes: N concurrent writer processes each write W distinct facts (reference:
   `create_entities`, one entity per fact; blackboard: `update_state` with `expect_version=0`).
   Afterwards each board is read back through its own tools (reference: `read_graph`, plus the
   JSONL file parsed directly; blackboard: `get_state` in batches of 100): acknowledged writes
   minus present writes = lost writes.
2. Read-modify-write: N processes each increment one shared counter K times. The reference has
   no compare-and-swap, so its best protocol is `open_nodes`, `add_observations("count=v+1")`,
   `delete_observations("count=v")`; the blackboard's is `get_state` + `update_state` with
   `expect_version`, retried on `conflict`. Final value vs N*K.
3. Latency with the same F facts on both boards, one client each, calls interleaved so both see
   the same machine load: `open_nodes` vs `get_state` (one fact), `search_nodes` vs `search_keys`
   (a word held by F/100 facts), `read_graph` (whole graph) vs `list_keys` (200 rows; the
   blackboard has no whole-board read). p50/p99 ms.

The reference is installed with npm into bench/out/reference/ unless it is already there.

    python bench/compare_reference.py [--writers 1,4,16] [--facts 50] [--increments 20] \
        [--latency-facts 1000] [--latency-calls 200] [--reference-version 2026.8.31]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any, Literal

import httpx2
from _harness import (
    bench_issuer,
    bench_token,
    embedded_redis,
    percentile,
    scratch,
    start_bench_gateway,
)
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from blackboard_mcp.auth import TokenIssuer

REFERENCE_PACKAGE = "@modelcontextprotocol/server-memory"
REFERENCE_VERSION = "2026.8.31"
DEFAULT_CACHE = Path(__file__).resolve().parent / "out" / "reference"
WS = "cmp"
COUNTER = "shared-counter"
COUNT_RE = re.compile(r"^count=(\d+)$")
# A bound on conflict retries for one increment, so a bug cannot spin forever.
MAX_RETRIES = 10_000
# The two sides' readers of one page: get_state takes 100 uris; a budget that holds them all.
PAGE = 100
BIG_BUDGET = 100_000

Scenario = Literal["facts", "counter"]


@dataclass(frozen=True)
class Reference:
    """How to start one reference server process on a shared memory file."""

    node: str
    script: str
    memory_file: str


@dataclass(frozen=True)
class Blackboard:
    """One shared gateway and the bearer token of one agent."""

    mcp_url: str
    token: str


Target = Reference | Blackboard


@dataclass(frozen=True)
class WriterJob:
    target: Target
    scenario: Scenario
    writer: int
    count: int
    space: str


@dataclass
class WriterResult:
    writer: int
    acked: int = 0
    errors: int = 0
    retries: int = 0
    started: float = 0.0
    finished: float = 0.0
    first_error: str = ""


@dataclass
class WriteRow:
    board: str
    writers: int
    attempted: int
    acked: int
    present_tool: int
    present_file: int | None
    errors: int
    seconds: float
    note: str = ""

    @property
    def lost(self) -> int:
        return self.acked - self.present_tool


@dataclass
class CounterRow:
    board: str
    writers: int
    expected: int
    acked: int
    final: int
    errors: int
    retries: int
    seconds: float
    note: str = ""


@dataclass
class LatencyRow:
    operation: str
    reference_tool: str
    blackboard_tool: str
    reference_ms: list[float] = field(default_factory=list)
    blackboard_ms: list[float] = field(default_factory=list)
    reference_hits: list[int] = field(default_factory=list)
    blackboard_hits: list[int] = field(default_factory=list)


# --- the reference: install, files -------------------------------------------------------------


def install_reference(cache: Path, version: str) -> tuple[str, str]:
    """The reference's entry script and installed version; npm installs it unless present."""
    package_dir = cache / "node_modules" / REFERENCE_PACKAGE
    manifest = package_dir / "package.json"
    if not manifest.exists() or json.loads(manifest.read_text())["version"] != version:
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("npm is needed to install the reference server")
        cache.mkdir(parents=True, exist_ok=True)
        # A package.json of its own keeps npm from installing into a parent folder.
        own = cache / "package.json"
        if not own.exists():
            own.write_text('{"name": "bb-compare-reference", "private": true}\n')
        print(f"installing {REFERENCE_PACKAGE}@{version} with npm ...", flush=True)
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", f"{REFERENCE_PACKAGE}@{version}"],
            cwd=cache,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    installed = json.loads(manifest.read_text())
    script = package_dir / installed["bin"]["mcp-server-memory"]
    return str(script), str(installed["version"])


def file_entities(memory_file: Path) -> tuple[dict[str, list[str]], int]:
    """Entity name -> observations as the JSONL file holds them, and unparsable lines."""
    entities: dict[str, list[str]] = {}
    bad = 0
    if not memory_file.exists():
        return entities, bad
    for line in memory_file.read_text().splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if item.get("type") == "entity":
            entities[item["name"]] = list(item.get("observations", []))
    return entities, bad


# --- blackboard-mcp: gateway and tokens ---------------------------------------------------------


def blackboard_writers(
    bb_url: str, issuer: TokenIssuer, scenario: Scenario, n: int, count: int, space: str
) -> list[WriterJob]:
    """N writer jobs against the gateway, each with a token of its own subject."""
    return [
        WriterJob(
            Blackboard(bb_url, bench_token(workspace=WS, subject=f"writer-{i}", issuer=issuer)),
            scenario,
            i,
            count,
            space,
        )
        for i in range(n)
    ]


# --- both boards through the SDK client ---------------------------------------------------------


@contextlib.asynccontextmanager
async def connect(target: Target) -> AsyncIterator[Client]:
    """The official Python MCP client: stdio for the reference, Streamable HTTP otherwise."""
    if isinstance(target, Reference):
        params = StdioServerParameters(
            command=target.node,
            args=[target.script],
            env={"MEMORY_FILE_PATH": target.memory_file},
        )
        with open(os.devnull, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                yield client
    else:
        headers = {"Authorization": f"Bearer {target.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120.0) as http,
            Client(streamable_http_client(target.mcp_url, http_client=http)) as client,
        ):
            yield client


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    """(is_error, body): the structured result, or the text of an unstructured error."""
    result = await client.call_tool(tool, arguments)
    body = result.structured_content
    if not isinstance(body, dict):
        text = " ".join(getattr(part, "text", "") for part in result.content)
        body = {"error": {"code": "text", "message": text}}
    return bool(result.is_error), body


def error_text(body: dict[str, Any]) -> str:
    error = body.get("error")
    if isinstance(error, dict):
        return f"{error.get('code')}: {error.get('message')}"[:200]
    return json.dumps(body)[:200]


def fact_text(writer: int, index: int) -> str:
    return f"writer {writer} fact {index}"


def fact_name(space: str, writer: int, index: int) -> str:
    return f"{space}-w{writer}-f{index}"


def fact_uri(space: str, writer: int, index: int) -> str:
    return f"bb://{WS}/{space}/w{writer}/f{index}"


def counter_uri(space: str) -> str:
    return f"bb://{WS}/{space}/value"


def counter_values(body: dict[str, Any]) -> list[int]:
    values: list[int] = []
    for entity in body.get("entities", []):
        if entity.get("name") == COUNTER:
            for observation in entity.get("observations", []):
                match = COUNT_RE.match(observation)
                if match:
                    values.append(int(match.group(1)))
    return values


# --- writer processes ---------------------------------------------------------------------------


async def write_facts(client: Client, job: WriterJob, result: WriterResult) -> None:
    for j in range(job.count):
        if isinstance(job.target, Reference):
            name = fact_name(job.space, job.writer, j)
            entity = {
                "name": name,
                "entityType": "fact",
                "observations": [fact_text(job.writer, j)],
            }
            is_error, body = await call(client, "create_entities", entities=[entity])
            # The reference acknowledges the entities it created; an existing name is skipped.
            ok = not is_error and any(e.get("name") == name for e in body.get("entities", []))
        else:
            is_error, body = await call(
                client,
                "update_state",
                uri=fact_uri(job.space, job.writer, j),
                digest=fact_text(job.writer, j),
                body=fact_text(job.writer, j),
                expect_version=0,
            )
            ok = not is_error
        if ok:
            result.acked += 1
        else:
            result.errors += 1
            result.first_error = result.first_error or error_text(body)


async def increment_reference(client: Client, result: WriterResult) -> bool:
    is_error, body = await call(client, "open_nodes", names=[COUNTER])
    if is_error:
        result.first_error = result.first_error or error_text(body)
        return False
    seen = counter_values(body)
    current = max(seen, default=0)
    # Add the new value before deleting the old one, so a reader never finds no value.
    is_error, body = await call(
        client,
        "add_observations",
        observations=[{"entityName": COUNTER, "contents": [f"count={current + 1}"]}],
    )
    if not is_error and seen:
        is_error, body = await call(
            client,
            "delete_observations",
            deletions=[{"entityName": COUNTER, "observations": [f"count={v}" for v in seen]}],
        )
    if is_error:
        result.first_error = result.first_error or error_text(body)
    return not is_error


async def increment_blackboard(client: Client, uri: str, result: WriterResult) -> bool:
    known: dict[str, Any] = {}
    for _ in range(MAX_RETRIES):
        if not known:
            is_error, body = await call(client, "get_state", uris=[uri])
            known = body["items"][0] if not is_error and body.get("items") else {}
            if is_error or "version" not in known:
                result.first_error = result.first_error or error_text(body)
                return False
        match = COUNT_RE.match(str(known.get("digest", "")))
        if not match:
            result.first_error = result.first_error or f"counter unreadable: {known}"
            return False
        value = int(match.group(1)) + 1
        is_error, body = await call(
            client,
            "update_state",
            uri=uri,
            digest=f"count={value}",
            body=str(value),
            expect_version=known["version"],
        )
        if not is_error:
            return True
        error = body.get("error", {})
        if error.get("code") != "conflict":
            result.first_error = result.first_error or error_text(body)
            return False
        result.retries += 1
        # A conflict carries the note's current version and digest: retry from those without
        # reading again (the digest holds the value), or read again when they are missing.
        known = {}
        if "current_version" in error and "current_digest" in error:
            known = {"version": error["current_version"], "digest": error["current_digest"]}
    result.first_error = result.first_error or "gave up after MAX_RETRIES conflicts"
    return False


async def writer_main(job: WriterJob, barrier: Barrier) -> WriterResult:
    result = WriterResult(writer=job.writer)
    async with connect(job.target) as client:
        # Connected (server process started, handshake done); start writing together.
        await asyncio.to_thread(barrier.wait, 300)
        result.started = time.time()
        if job.scenario == "facts":
            await write_facts(client, job, result)
        else:
            for _ in range(job.count):
                if isinstance(job.target, Reference):
                    ok = await increment_reference(client, result)
                else:
                    ok = await increment_blackboard(client, counter_uri(job.space), result)
                if ok:
                    result.acked += 1
                else:
                    result.errors += 1
        result.finished = time.time()
    return result


def writer_process(job: WriterJob, barrier: Barrier, results: Queue[WriterResult]) -> None:
    try:
        results.put(asyncio.run(writer_main(job, barrier)))
    except BaseException as exc:  # report any failure to the parent instead of hanging it
        barrier.abort()
        results.put(
            WriterResult(writer=job.writer, errors=job.count, first_error=f"crashed: {exc!r}")
        )


def run_writers(jobs: Sequence[WriterJob]) -> tuple[list[WriterResult], float]:
    """Run each job in its own process, all starting together; results and wall seconds."""
    # fork, not spawn: a spawned child imports the MCP SDK and this package again (about 1.5 s
    # of CPU each). The parent forks between asyncio.run calls, with no loop and one thread.
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(len(jobs))
    results: Queue[WriterResult] = ctx.Queue()
    procs = [ctx.Process(target=writer_process, args=(job, barrier, results)) for job in jobs]
    for proc in procs:
        proc.start()
    collected = [results.get(timeout=1800) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    started = [r.started for r in collected if r.started]
    finished = [r.finished for r in collected if r.finished]
    seconds = max(finished) - min(started) if started and finished else float("nan")
    return sorted(collected, key=lambda r: r.writer), seconds


def summarise(results: Sequence[WriterResult]) -> tuple[int, int, int, str]:
    first = next((r.first_error for r in results if r.first_error), "")
    return (
        sum(r.acked for r in results),
        sum(r.errors for r in results),
        sum(r.retries for r in results),
        first,
    )


# --- scenarios ----------------------------------------------------------------------------------


async def reference_fact_count(target: Reference, expected: set[str]) -> int:
    async with connect(target) as client:
        is_error, body = await call(client, "read_graph")
    if is_error:
        raise RuntimeError(f"read_graph failed: {error_text(body)}")
    return len(expected & {e["name"] for e in body.get("entities", [])})


async def blackboard_present(target: Blackboard, uris: Sequence[str]) -> int:
    present = 0
    async with connect(target) as client:
        for start in range(0, len(uris), PAGE):
            page = list(uris[start : start + PAGE])
            is_error, body = await call(
                client, "get_state", uris=page, mode="ref", budget_tokens=BIG_BUDGET
            )
            if is_error or body.get("truncated"):
                raise RuntimeError(f"get_state read-back failed: {error_text(body)}")
            present += sum(1 for item in body["items"] if "error" not in item)
    return present


def facts_scenario(
    n: int, w: int, ref: Reference, bb_url: str, issuer: TokenIssuer, work: Path
) -> list[WriteRow]:
    rows: list[WriteRow] = []
    space = f"facts-n{n}"
    memory_file = work / f"{space}.jsonl"
    target = Reference(ref.node, ref.script, str(memory_file))
    jobs = [WriterJob(target, "facts", i, w, space) for i in range(n)]
    results, seconds = run_writers(jobs)
    acked, errors, _, first = summarise(results)
    names = {fact_name(space, i, j) for i in range(n) for j in range(w)}
    in_tool = asyncio.run(reference_fact_count(target, names))
    in_file, bad = file_entities(memory_file)
    stray = len(list(work.glob(f"{space}.jsonl.*.tmp")))
    note = first
    if bad or stray:
        note = f"{bad} unparsable lines, {stray} stray temp files; " + note
    rows.append(
        WriteRow(
            "reference",
            n,
            n * w,
            acked,
            in_tool,
            len(names & set(in_file)),
            errors,
            seconds,
            note,
        )
    )

    jobs = blackboard_writers(bb_url, issuer, "facts", n, w, space)
    results, seconds = run_writers(jobs)
    acked, errors, _, first = summarise(results)
    reader = Blackboard(bb_url, bench_token(workspace=WS, subject="reader", issuer=issuer))
    uris = [fact_uri(space, i, j) for i in range(n) for j in range(w)]
    present = asyncio.run(blackboard_present(reader, uris))
    rows.append(WriteRow("blackboard", n, n * w, acked, present, None, errors, seconds, first))
    return rows


async def seed_reference_counter(target: Reference) -> None:
    async with connect(target) as client:
        entity = {"name": COUNTER, "entityType": "counter", "observations": ["count=0"]}
        is_error, body = await call(client, "create_entities", entities=[entity])
        if is_error:
            raise RuntimeError(error_text(body))


async def reference_counter_value(target: Reference) -> tuple[int, int]:
    """The counter's value (the largest count present) and how many count values are present."""
    async with connect(target) as client:
        is_error, body = await call(client, "open_nodes", names=[COUNTER])
    if is_error:
        raise RuntimeError(error_text(body))
    values = counter_values(body)
    return max(values, default=0), len(values)


async def blackboard_counter(target: Blackboard, uri: str, value: int | None) -> int:
    """Create the counter at ``value``, or read it back when ``value`` is None."""
    async with connect(target) as client:
        if value is not None:
            is_error, body = await call(
                client, "update_state", uri=uri, digest=f"count={value}", body=str(value)
            )
        else:
            is_error, body = await call(client, "get_state", uris=[uri])
    if is_error:
        raise RuntimeError(error_text(body))
    if value is not None:
        return value
    match = COUNT_RE.match(str(body["items"][0].get("digest", "")))
    if not match:
        raise RuntimeError(f"counter unreadable: {body['items'][0]}")
    return int(match.group(1))


def counter_scenario(
    n: int, k: int, ref: Reference, bb_url: str, issuer: TokenIssuer, work: Path
) -> list[CounterRow]:
    rows: list[CounterRow] = []
    space = f"counter-n{n}"
    memory_file = work / f"{space}.jsonl"
    target = Reference(ref.node, ref.script, str(memory_file))
    asyncio.run(seed_reference_counter(target))
    results, seconds = run_writers([WriterJob(target, "counter", i, k, space) for i in range(n)])
    acked, errors, retries, first = summarise(results)
    final, held = asyncio.run(reference_counter_value(target))
    in_file, _ = file_entities(memory_file)
    file_values = [
        int(m.group(1)) for o in in_file.get(COUNTER, []) if (m := COUNT_RE.match(o)) is not None
    ]
    note = f"{held} count values held; file max {max(file_values, default=0)}"
    if first:
        note += "; " + first
    rows.append(CounterRow("reference", n, n * k, acked, final, errors, retries, seconds, note))

    reader = Blackboard(bb_url, bench_token(workspace=WS, subject="reader", issuer=issuer))
    uri = counter_uri(space)
    asyncio.run(blackboard_counter(reader, uri, 0))
    jobs = blackboard_writers(bb_url, issuer, "counter", n, k, space)
    results, seconds = run_writers(jobs)
    acked, errors, retries, first = summarise(results)
    final = asyncio.run(blackboard_counter(reader, uri, None))
    rows.append(CounterRow("blackboard", n, n * k, acked, final, errors, retries, seconds, first))
    return rows


def latency_text(index: int) -> str:
    # kw<3 digits>: a word held by every 100th fact, never a substring of another keyword.
    return f"fact {index} about kw{index % 100:03d}: observed by the latency seed of this run"


async def timed(samples: list[float], hits: list[int], op: Awaitable[tuple[bool, int]]) -> int:
    t0 = time.perf_counter()
    ok, count = await op
    samples.append((time.perf_counter() - t0) * 1000)
    hits.append(count)
    return 0 if ok else 1


async def latency_scenario(
    facts: int, calls: int, ref: Reference, bb_url: str, issuer: TokenIssuer, work: Path
) -> tuple[list[LatencyRow], int]:
    space = "lat"
    target = Reference(ref.node, ref.script, str(work / "latency.jsonl"))
    board = Blackboard(bb_url, bench_token(workspace=WS, subject="latency", issuer=issuer))
    names = [f"fact-{i:04d}" for i in range(facts)]
    uris = [f"bb://{WS}/{space}/fact-{i:04d}" for i in range(facts)]
    async with connect(target) as rc, connect(board) as bc:
        for start in range(0, facts, PAGE):
            entities = [
                {"name": names[i], "entityType": "fact", "observations": [latency_text(i)]}
                for i in range(start, min(facts, start + PAGE))
            ]
            is_error, body = await call(rc, "create_entities", entities=entities)
            if is_error:
                raise RuntimeError(error_text(body))
        gate = asyncio.Semaphore(8)

        async def seed(i: int) -> None:
            async with gate:
                is_error, body = await call(
                    bc, "update_state", uri=uris[i], digest=latency_text(i), body=latency_text(i)
                )
            if is_error:
                raise RuntimeError(error_text(body))

        await asyncio.gather(*(seed(i) for i in range(facts)))

        async def ref_tool(tool: str, key: str, **arguments: Any) -> tuple[bool, int]:
            is_error, body = await call(rc, tool, **arguments)
            return not is_error, len(body.get(key, []))

        async def bb_tool(tool: str, **arguments: Any) -> tuple[bool, int]:
            is_error, body = await call(bc, tool, **arguments)
            return not is_error, len(body.get("items", []))

        point = LatencyRow("read one fact", "open_nodes", "get_state")
        search = LatencyRow("search a word", "search_nodes", "search_keys")
        whole = LatencyRow("list the board", "read_graph (all)", "list_keys (200)")
        errors = 0
        for r in range(calls):
            i = (r * 37) % facts
            word = f"kw{r % 100:03d}"
            rounds: list[
                tuple[LatencyRow, Awaitable[tuple[bool, int]], Awaitable[tuple[bool, int]]]
            ]
            rounds = [
                (
                    point,
                    ref_tool("open_nodes", "entities", names=[names[i]]),
                    bb_tool("get_state", uris=[uris[i]]),
                ),
                (
                    search,
                    ref_tool("search_nodes", "entities", query=word),
                    bb_tool("search_keys", q=word, topic=space),
                ),
                (
                    whole,
                    ref_tool("read_graph", "entities"),
                    bb_tool("list_keys", topic=space, limit=200, budget_tokens=BIG_BUDGET),
                ),
            ]
            # Coroutines only start when awaited, so each pair runs back to back, in order.
            for row, ref_op, bb_op in rounds:
                errors += await timed(row.reference_ms, row.reference_hits, ref_op)
                errors += await timed(row.blackboard_ms, row.blackboard_hits, bb_op)
    return [point, search, whole], errors


# --- report -------------------------------------------------------------------------------------


def ratio(a: float, b: float) -> str:
    if b == 0:
        return "n/a"
    return f"{a / b:.1f}x"


def report(
    writes: Sequence[WriteRow],
    counters: Sequence[CounterRow],
    latencies: Sequence[LatencyRow],
    latency_errors: int,
    facts: int,
) -> None:
    print("\nLost writes: N writer processes x W distinct facts; acknowledged vs read back")
    print(
        f"{'board':<11} {'N':>3} {'attempted':>9} {'acked':>6} {'present':>8} {'in file':>8} "
        f"{'lost':>5} {'errors':>6} {'writes/s':>9}  note"
    )
    for row in writes:
        in_file = "-" if row.present_file is None else str(row.present_file)
        rate = row.acked / row.seconds if row.seconds > 0 else float("nan")
        print(
            f"{row.board:<11} {row.writers:>3} {row.attempted:>9} {row.acked:>6} "
            f"{row.present_tool:>8} {in_file:>8} {row.lost:>5} {row.errors:>6} {rate:>9.0f}  "
            f"{row.note}"
        )

    print("\nRead-modify-write: N processes x K increments of one shared counter")
    print(
        f"{'board':<11} {'N':>3} {'expected':>8} {'acked':>6} {'final':>6} {'lost':>5} "
        f"{'errors':>6} {'retries':>7} {'incr/s':>7}  note"
    )
    for c in counters:
        rate = c.acked / c.seconds if c.seconds > 0 else float("nan")
        print(
            f"{c.board:<11} {c.writers:>3} {c.expected:>8} {c.acked:>6} {c.final:>6} "
            f"{c.acked - c.final:>5} {c.errors:>6} {c.retries:>7} {rate:>7.0f}  {c.note}"
        )

    print(f"\nLatency, same {facts} facts on both, one client each, calls interleaved (ms)")
    print(
        f"{'operation':<15} {'reference tool':<17} {'p50':>7} {'p99':>7} {'hits':>5}   "
        f"{'blackboard tool':<16} {'p50':>7} {'p99':>7} {'hits':>5}"
    )
    for lat in latencies:
        print(
            f"{lat.operation:<15} {lat.reference_tool:<17} "
            f"{statistics.median(lat.reference_ms):>7.2f} "
            f"{percentile(lat.reference_ms, 0.99):>7.2f} "
            f"{statistics.mean(lat.reference_hits):>5.0f}   {lat.blackboard_tool:<16} "
            f"{statistics.median(lat.blackboard_ms):>7.2f} "
            f"{percentile(lat.blackboard_ms, 0.99):>7.2f} "
            f"{statistics.mean(lat.blackboard_hits):>5.0f}"
        )
    if latency_errors:
        print(f"({latency_errors} latency calls returned an error)")

    print("\nVerdict")
    for n in sorted({row.writers for row in writes}):
        ref = next(r for r in writes if r.board == "reference" and r.writers == n)
        bb = next(r for r in writes if r.board == "blackboard" and r.writers == n)
        print(
            f"- lost writes, N={n}: reference lost {ref.lost} of {ref.acked} acknowledged "
            f"({100 * ref.lost / max(ref.acked, 1):.0f}%), blackboard lost {bb.lost} of {bb.acked}"
        )
    for n in sorted({c.writers for c in counters}):
        ref_c = next(c for c in counters if c.board == "reference" and c.writers == n)
        bb_c = next(c for c in counters if c.board == "blackboard" and c.writers == n)
        print(
            f"- counter, N={n}: reference ended at {ref_c.final} of {ref_c.expected}, "
            f"blackboard at {bb_c.final} of {bb_c.expected} "
            f"({bb_c.retries} conflict retries)"
        )
    for lat in latencies:
        ref_p50 = statistics.median(lat.reference_ms)
        bb_p50 = statistics.median(lat.blackboard_ms)
        faster = "blackboard" if bb_p50 < ref_p50 else "reference"
        print(
            f"- {lat.operation}: p50 {lat.reference_tool} {ref_p50:.2f} ms vs "
            f"{lat.blackboard_tool} {bb_p50:.2f} ms; {faster} faster by "
            f"{ratio(max(ref_p50, bb_p50), min(ref_p50, bb_p50))}"
        )


_T0 = time.monotonic()


def phase(name: str) -> None:
    print(f"[{time.monotonic() - _T0:6.1f} s] {name}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--writers", default="1,4,16", help="writer process counts, comma list")
    parser.add_argument("--facts", type=int, default=50, help="facts per writer (W)")
    parser.add_argument("--increments", type=int, default=20, help="increments per writer (K)")
    parser.add_argument("--latency-facts", type=int, default=1000)
    parser.add_argument("--latency-calls", type=int, default=200, help="calls per operation")
    parser.add_argument("--gateway-workers", type=int, default=1)
    parser.add_argument("--reference-version", default=REFERENCE_VERSION)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="npm install folder")
    args = parser.parse_args()
    writer_counts = [int(x) for x in args.writers.split(",") if x.strip()]

    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is needed to run the reference server")
    script, version = install_reference(args.cache, args.reference_version)
    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    print(f"reference: {REFERENCE_PACKAGE}@{version} on node {node_version.strip()}")
    print(
        f"writers {writer_counts}, W={args.facts} facts each, K={args.increments} increments "
        f"each; latency over {args.latency_facts} facts, {args.latency_calls} calls per "
        f"operation; gateway workers {args.gateway_workers}; {os.cpu_count()} CPUs",
        flush=True,
    )

    with scratch("bb-compare-") as work:
        (work / "ref").mkdir()
        with (
            embedded_redis(work / "redis") as redis_server,
            start_bench_gateway(
                redis_server.url, work / "gw", workers=args.gateway_workers
            ) as gateway,
        ):
            bb_url = gateway.mcp_url
            issuer = bench_issuer()
            ref = Reference(node, script, "")
            writes: list[WriteRow] = []
            counters: list[CounterRow] = []
            for n in writer_counts:
                phase(f"lost writes, N={n}")
                writes += facts_scenario(n, args.facts, ref, bb_url, issuer, work / "ref")
            for n in writer_counts:
                phase(f"counter, N={n}")
                counters += counter_scenario(n, args.increments, ref, bb_url, issuer, work / "ref")
            phase("latency")
            latencies, latency_errors = asyncio.run(
                latency_scenario(
                    args.latency_facts, args.latency_calls, ref, bb_url, issuer, work / "ref"
                )
            )
    phase("done")
    report(writes, counters, latencies, latency_errors, args.latency_facts)


if __name__ == "__main__":
    main()
