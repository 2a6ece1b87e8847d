"""Read-path latency on a large board: get_state of 10 random uris (digest mode), search_keys
of varied selectivity, and list_keys(topic, limit 20), p50/p99/mean and calls/s with 1 and 16
concurrent clients, on 100,000 notes, with the same cells measured at 10,000 notes on the way
so the scaling is visible. Also prints the load rate, Redis used_memory and the index size
(FT.INFO) at each scale, right after the load and after one forced index GC cycle
(FT.DEBUG GC_FORCEINVOKE): each write re-indexes its note more than once, and the stale
postings it leaves would otherwise be swept at an arbitrary moment, so every scale is measured
after the sweep.

Notes are written through ``Board.update_state`` (the store's real write path, so the index
and every metadata key are what production has), by several processes each running many
asyncio writers. Their text comes from a seeded vocabulary drawn with a Zipf-like frequency
(short words commonest), so one word matches every note and another a few hundred: digests of
15-25 words, bodies of 300-1,000 bytes, 20 topics. Clients of the measured cells are asyncio
tasks of this one process sharing one connection pool, as in a gateway worker.

    python bench/read_path.py [--notes 100000] [--checkpoint 10000] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing
import os
import random
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from _harness import concurrently, embedded_redis
from redis.exceptions import RedisError

from blackboard_mcp.store import (
    Board,
    GetState,
    ListKeys,
    SearchKeys,
    UpdateState,
    board_client,
)

WS = "bench"
SEED = 20261202
TOPICS = tuple(f"topic-{i:02d}" for i in range(20))
VOCABULARY = 20_000
ZIPF_EXPONENT = 1.0
# Consonant-vowel syllables, at least two of them: no word is one of RediSearch's stop words,
# and with no s/e/i/y endings the English stemmer leaves nearly every word as it is.
CONSONANTS = "bdfgklmnprtvz"
VOWELS = "aou"
CLIENTS = (1, 16)
LOAD_CHUNK = 1000


class Corpus:
    """A seeded vocabulary drawn with weight 1 / rank**ZIPF_EXPONENT, and the notes made of it."""

    def __init__(self, seed: int = SEED, size: int = VOCABULARY) -> None:
        rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < size:
            syllables = rng.choices((2, 3, 4), weights=(2, 5, 3))[0]
            words.add(
                "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables))
            )
        ordered = sorted(words)
        rng.shuffle(ordered)
        # Stable sort by length: the commonest words are the shortest, as in natural text.
        ordered.sort(key=len)
        self.words = ordered
        total = 0.0
        self._cumulative: list[float] = []
        for rank in range(1, size + 1):
            total += 1.0 / rank**ZIPF_EXPONENT
            self._cumulative.append(total)

    def word(self, rank: int) -> str:
        """The word of frequency rank ``rank`` (1 = commonest)."""
        return self.words[rank - 1]

    def _text(self, rng: random.Random, min_chars: int) -> str:
        sentences: list[str] = []
        size = 0
        while size < min_chars:
            words = rng.choices(self.words, cum_weights=self._cumulative, k=rng.randint(6, 16))
            sentence = " ".join(words).capitalize() + "."
            sentences.append(sentence)
            size += len(sentence) + 1
        return " ".join(sentences)

    def note(self, i: int) -> tuple[str, str, str]:
        """Note ``i``'s uri, digest (15-25 words) and body (300-1,000 bytes), the same every run."""
        rng = random.Random(SEED * 1_000_003 + i)
        digest = " ".join(
            rng.choices(self.words, cum_weights=self._cumulative, k=rng.randint(15, 25))
        )
        body = self._text(rng, rng.randint(300, 1000))[:1000]
        return note_uri(i), digest.capitalize() + ".", body


def note_uri(i: int) -> str:
    return f"bb://{WS}/{TOPICS[i % len(TOPICS)]}/n{i:06d}"


@functools.cache
def _corpus() -> Corpus:
    return Corpus()


# ---------------------------------------------------------------- loading (worker processes)


def load_range(url: str, lo: int, hi: int, tasks: int) -> int:
    """Write notes ``lo``..``hi - 1`` through update_state with ``tasks`` concurrent writers."""
    return asyncio.run(_load_range(url, lo, hi, tasks))


async def _load_range(url: str, lo: int, hi: int, tasks: int) -> int:
    corpus = _corpus()
    board = Board.from_url(url)
    pending = iter(range(lo, hi))

    async def writer() -> None:
        # One iterator shared by the tasks: each next() runs between awaits, so no note is
        # written twice.
        for i in pending:
            uri, digest, body = corpus.note(i)
            await board.update_state(
                UpdateState.parse(
                    {"uri": uri, "digest": digest, "body": body, "expect_version": 0}
                ),
                author=f"agent-{i % 7}",
            )

    try:
        await asyncio.gather(*(writer() for _ in range(tasks)))
    finally:
        await board.close()
    return hi - lo


def load(pool: ProcessPoolExecutor, url: str, lo: int, hi: int, tasks: int) -> float:
    """Load notes ``lo``..``hi - 1`` in chunks over the pool; print progress; return seconds."""
    t0 = time.perf_counter()
    futures = [
        pool.submit(load_range, url, start, min(start + LOAD_CHUNK, hi), tasks)
        for start in range(lo, hi, LOAD_CHUNK)
    ]
    done = 0
    reported = 0.0
    for future in as_completed(futures):
        done += future.result()
        elapsed = time.perf_counter() - t0
        if elapsed - reported >= 15 or done == hi - lo:
            reported = elapsed
            print(f"  loaded {lo + done:>7,} notes ({done / elapsed:,.0f} notes/s)", flush=True)
    return time.perf_counter() - t0


# ---------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Cell:
    """One measured cell: calls made, calls/s, and latencies in milliseconds."""

    calls: int
    rate: float
    mean: float
    p50: float
    p99: float


Op = Callable[[random.Random], Awaitable[object]]


async def measure(op: Op, clients: int, seconds: float) -> Cell:
    # Warm-up: open every client's connection before the clock starts.
    await asyncio.gather(*(op(random.Random(-c - 1)) for c in range(clients)))
    rngs = [random.Random(c) for c in range(clients)]
    timed = await concurrently(lambda client, _: op(rngs[client]), clients, seconds)
    return Cell(
        calls=timed.calls,
        rate=timed.rate,
        mean=timed.mean_ms,
        p50=timed.p50_ms,
        p99=timed.ms(0.99),
    )


@dataclass(frozen=True)
class Search:
    """One search_keys query of the bench, and the notes it matches."""

    label: str
    q: str
    topic: str | None


def searches(corpus: Corpus) -> list[Search]:
    # Ranks picked for selectivity at 100k notes of ~130 words: rank 1 is in every note,
    # rank 100 in roughly one in ten, rank 10,000 in about one in a thousand.
    rare, medium, common = corpus.word(10_000), corpus.word(100), corpus.word(1)
    return [
        Search("rare word (rank 10000)", rare, None),
        Search("medium word (rank 100)", medium, None),
        Search("common word (rank 1)", common, None),
        Search("two words (rank 300+3000)", f"{corpus.word(300)} {corpus.word(3000)}", None),
        Search("rank 100 word, 1 topic", medium, TOPICS[3]),
    ]


def _tag(value: str) -> str:
    return value.replace("-", "\\-")


async def matches(client: aioredis.Redis[bytes], index: str, search: Search) -> int:
    """How many notes the query matches (FT.SEARCH LIMIT 0 0), beside the top 10 it returns."""
    words = " | ".join(search.q.split())
    topic = f" @topic:{{{_tag(search.topic)}}}" if search.topic else ""
    query = f"@ws:{{{_tag(WS)}}}{topic} ({words})"
    reply = await _command(client, "FT.SEARCH", index, query, "LIMIT", 0, 0, "DIALECT", 2)
    # RESP3 (redis-py 8's default here) answers with a map, RESP2 with a list.
    return int(reply[b"total_results"] if isinstance(reply, dict) else reply[0])


async def _command(client: aioredis.Redis[bytes], *args: object) -> Any:
    return await client.execute_command(*args)  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8


def _load_average(when: str) -> str:
    # The machine is shared: the load average says how much the figures were competing for.
    one, five, _ = os.getloadavg()
    return f"load average {when}: {one:.1f} (1 min), {five:.1f} (5 min), {os.cpu_count()} cores"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def index_info(client: aioredis.Redis[bytes], index: str) -> dict[str, str]:
    reply = await _command(client, "FT.INFO", index)
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    return {_text(k): _text(v) for k, v in zip(reply[::2], reply[1::2], strict=True)}


async def settle(client: aioredis.Redis[bytes]) -> float:
    """Wait for an AOF rewrite started by the load to finish, so it does not skew the reads."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 120:
        persistence = await client.info("persistence")
        if not int(persistence.get("aof_rewrite_in_progress", 0)):
            break
        await asyncio.sleep(0.5)
    return time.perf_counter() - t0


async def report_size(
    client: aioredis.Redis[bytes], index: str, notes: int, when: str
) -> dict[str, float]:
    memory = await client.info("memory")
    info = await index_info(client, index)
    used = int(memory["used_memory"])
    docs = max(int(info.get("num_docs", 0)), 1)
    records = int(float(info.get("num_records", 0)))
    max_doc_id = int(info.get("max_doc_id", 0))
    inverted = float(info.get("inverted_sz_mb", 0))
    offsets = float(info.get("offset_vectors_sz_mb", 0))
    doc_table = float(info.get("doc_table_size_mb", 0))
    print(
        f"{when}: Redis used_memory {used / 2**20:,.1f} MiB ({used / notes / 1024:.1f} KiB/note), "
        f"dataset {int(memory['used_memory_dataset']) / 2**20:,.1f} MiB"
    )
    # max_doc_id / num_docs: how many times each note was indexed (every re-index of a hash
    # takes a new doc id); num_records counts posting entries, stale ones until the GC runs.
    print(
        f"  FT.INFO num_docs {docs:,}, max_doc_id {max_doc_id:,} ({max_doc_id / docs:.1f} per "
        f"note), num_records {records:,} ({records / docs:.0f}/note), num_terms "
        f"{int(info.get('num_terms', 0)):,}, inverted index {inverted:,.1f} MB, offset vectors "
        f"{offsets:,.1f} MB, doc table {doc_table:,.1f} MB"
    )
    return {"used_mib": used / 2**20, "inverted_mb": inverted}


async def collect_garbage(client: aioredis.Redis[bytes], index: str) -> str:
    """Run one index GC cycle now, so every scale is measured without stale postings."""
    t0 = time.perf_counter()
    try:
        await _command(client, "FT.DEBUG", "GC_FORCEINVOKE", index)
    except RedisError as exc:
        return f"index GC could not be forced ({exc}); measured with stale postings"
    return f"forced an index GC cycle ({time.perf_counter() - t0:.1f}s)"


Key = tuple[str, int]


async def measure_scale(
    board: Board, index: str, notes: int, seconds: float, corpus: Corpus
) -> dict[Key, Cell]:
    client = board.client

    async def get_digests(rng: random.Random) -> object:
        uris = [note_uri(rng.randrange(notes)) for _ in range(10)]
        return await board.get_state(GetState.parse({"uris": uris, "mode": "digest"}))

    sample = await board.get_state(
        GetState.parse({"uris": [note_uri(i) for i in range(10)], "mode": "digest"})
    )
    missing = [item["uri"] for item in sample["items"] if "error" in item]
    if missing or sample["truncated"]:
        raise SystemExit(f"get_state sample is wrong: missing {missing}, {sample['truncated']=}")

    async def list_topic(rng: random.Random) -> object:
        return await board.list_keys(
            ListKeys.parse({"topic": rng.choice(TOPICS), "limit": 20}), workspace=WS
        )

    ops: list[tuple[str, Op, str]] = [
        ("get_state 10 uris digest", get_digests, f"{sample['spent_tokens']} tokens/call"),
        ("list_keys topic limit 20", list_topic, f"{notes // len(TOPICS):,} notes/topic"),
    ]
    for search in searches(corpus):

        def op(rng: random.Random, s: Search = search) -> Awaitable[object]:
            return board.search_keys(SearchKeys.parse({"q": s.q, "topic": s.topic}), workspace=WS)

        found = await matches(client, index, search)
        ops.append((f"search {search.label}", op, f"{found:,} matches"))

    print(
        f"{'operation':<38} {'clients':>7} {'calls':>6} {'calls/s':>8} {'mean ms':>8} "
        f"{'p50 ms':>8} {'p99 ms':>8}  note"
    )
    cells: dict[Key, Cell] = {}
    for label, op_fn, note in ops:
        for clients in CLIENTS:
            cell = await measure(op_fn, clients, seconds)
            cells[(label, clients)] = cell
            print(
                f"{label:<38} {clients:>7} {cell.calls:>6} {cell.rate:>8.0f} {cell.mean:>8.2f} "
                f"{cell.p50:>8.2f} {cell.p99:>8.2f}  {note}",
                flush=True,
            )
    return cells


# ---------------------------------------------------------------- main


async def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    corpus = _corpus()
    scales = sorted({n for n in (args.checkpoint, args.notes) if 0 < n <= args.notes})
    print(
        f"board: {args.notes:,} notes, {len(TOPICS)} topics, vocabulary {VOCABULARY:,} words "
        f"(Zipf s={ZIPF_EXPONENT}), digests 15-25 words, bodies 300-1,000 B; "
        f"{args.seconds}s per cell; loader {args.load_procs} processes x {args.load_tasks} tasks"
    )
    print(_load_average("at start"))
    sample_uri, sample_digest, sample_body = corpus.note(0)
    print(f"sample note {sample_uri}: {sample_digest[:90]}... ({len(sample_body)} B body)")
    with (
        embedded_redis() as server,
        ProcessPoolExecutor(
            max_workers=args.load_procs, mp_context=multiprocessing.get_context("spawn")
        ) as pool,
    ):
        client = board_client(server.url)
        board = Board(client=client)
        await board.start()
        index = _text((await _command(client, "FT._LIST"))[0])
        results: dict[int, dict[Key, Cell]] = {}
        sizes: dict[int, dict[str, float]] = {}
        loaded = 0
        try:
            for scale in scales:
                print(f"\n== loading notes {loaded:,}..{scale - 1:,} through update_state")
                seconds = load(pool, server.url, loaded, scale, args.load_tasks)
                print(
                    f"loaded {scale - loaded:,} notes in {seconds:.1f}s: "
                    f"{(scale - loaded) / seconds:,.0f} notes/s"
                )
                loaded = scale
                waited = await settle(client)
                if waited > 1:
                    print(f"waited {waited:.1f}s for an AOF rewrite to finish")
                print(f"\n== {scale:,} notes")
                await report_size(client, index, scale, "right after the load")
                print(await collect_garbage(client, index))
                sizes[scale] = await report_size(client, index, scale, "after the index GC")
                results[scale] = await measure_scale(board, index, scale, args.seconds, corpus)
        finally:
            await board.close()
    if len(scales) == 2:
        small, large = scales
        print(f"\n== scaling: {large:,} notes vs {small:,} ({large // small}x the notes)")
        memory = sizes[large]["used_mib"] / sizes[small]["used_mib"]
        inverted = sizes[large]["inverted_mb"] / max(sizes[small]["inverted_mb"], 1e-9)
        print(f"used_memory {memory:.2f}x, inverted index {inverted:.2f}x")
        print(f"{'operation':<38} {'clients':>7} {'p50 ratio':>10} {'p99 ratio':>10}")
        for key, cell in results[large].items():
            before = results[small][key]
            print(
                f"{key[0]:<38} {key[1]:>7} {cell.p50 / before.p50:>10.2f} "
                f"{cell.p99 / before.p99:>10.2f}"
            )
    print(f"\ntotal run time {time.perf_counter() - started:.0f}s; {_load_average('at end')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument(
        "--checkpoint", type=int, default=10_000, help="also measure at this many notes (0: no)"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="per measured cell")
    parser.add_argument("--load-procs", type=int, default=2, help="loader processes")
    parser.add_argument("--load-tasks", type=int, default=16, help="writers per loader process")
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
