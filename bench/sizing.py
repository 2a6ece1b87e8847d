"""Redis memory per note against the payload, for the index and hash layouts side by side.

Writes N notes (a digest of about 80 bytes and a body of ``--body-bytes`` of random words from
a 2,000-word vocabulary, over 5 topics) through the store, then prints Redis's used_memory
growth against the payload bytes (digest + body), split into the note hashes, the search index
and the rest (of which the per-topic sorted sets and the change log are named), and checks
that search still finds a note by a word of its digest and by a word of its body. Each
layout is loaded into the same emptied Redis in turn, in one run:

- ``now``: this version: a notes index of document ids only (no term offsets, frequencies or
  field flags) beside a digests index, notes kept as listpacks.
- ``v2``: the one index of the previous release (without term offsets, the digest weighted 5).
- ``before``: that index with term offsets, each note a hash table (Redis's default
  ``hash-max-listpack-value`` of 64 bytes), as the first release stored them.
- with ``--options``, ``v2`` plus further options of its one index, to show what each saves;
  what each one costs is in docs/operations.md ("Search index options").

The old layouts' notes are written by this version's store, plus the per-topic sets by
recency that the earlier versions also kept (this version merges the sets by kind instead).

``--layouts`` loads only the layouts named (``--layouts now`` for a large board). After the
``now`` layout the board is read through the store's public calls, as the gateway's tools
call them, one call at a time (``--no-reads`` skips this):

- ``search_keys`` with the default limit, ``--queries`` times each, for a rare word (one
  note's digest holds it), a common word (the vocabulary's most frequent searchable word,
  in many notes) and an old word (common in older notes, in none of the latest 30,000
  writes: ``OLD_WORD``): p50 and p99 ms, and how many notes each matches; each twice, side
  by side:
  with the store's default search window (the latest writes first) and with none
  (``search_window=0``: every match scored, as before the window);
- ``list_keys`` of the topic ``big`` (else ``t0``), default order and limit (or
  ``--page-limit``), page after page through ``next`` until the topic is done: p50 and p99 ms
  per page, the pages, the whole walk's time, and a check that every note came exactly once.

``--big-topic-notes B`` puts B notes, spread evenly through the load, into the topic ``big``
and the others over ``--topics`` topics; without it, every note goes to one of ``--topics``
topics in turn, as before. Progress goes to stderr every 30 s.

    python bench/sizing.py [--notes 3000] [--body-bytes 1024] [--options]
    python bench/sizing.py --notes 100000      # the issue's size; about 12 minutes here
    python bench/sizing.py --notes 1000000 --layouts now --big-topic-notes 100000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import string
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import redis
import redis.asyncio as aioredis
from _harness import embedded_redis, median, percentile
from redis.commands.search.query import Query

from blackboard_mcp.store import (
    Board,
    BoardLimits,
    ListKeys,
    SearchKeys,
    UpdateState,
    board_client,
)
from blackboard_mcp.store.connection._board_client import RoutedClient
from blackboard_mcp.store.connection._field_names import FIELD
from blackboard_mcp.store.connection._key_names import (
    INDEX_NAME,
    NOTE_PREFIX,
    by_kind,
    by_recent,
    digest_index,
)
from blackboard_mcp.store.connection._search_index import ensure_index
from blackboard_mcp.store.embedded._embedded import NOTE_LISTPACK_VALUE_BYTES
from blackboard_mcp.store.notes._notes import KINDS
from blackboard_mcp.store.search._query import query_terms

# The fields of the single index of the first two releases: the digest weighted 5, the update
# time sortable (over this version's stored field names, each under its long name).
OLD_SCHEMA = (
    "SCHEMA", FIELD.ws, "AS", "ws", "TAG", FIELD.topic, "AS", "topic", "TAG",
    FIELD.kind, "AS", "kind", "TAG", FIELD.digest, "AS", "digest", "TEXT", "WEIGHT", "5.0",
    FIELD.body, "AS", "body", "TEXT", FIELD.stext, "AS", "stext", "TEXT",
    FIELD.updated, "AS", "updated", "NUMERIC", "SORTABLE",
)  # fmt: skip


@dataclass(frozen=True)
class Layout:
    name: str
    listpack_value: int
    # The old single index's options; None: this version's indexes
    # (store/connection/_search_index.py).
    index_options: tuple[str, ...] | None


NOW = Layout("now", NOTE_LISTPACK_VALUE_BYTES, None)
V2 = Layout("v2", NOTE_LISTPACK_VALUE_BYTES, ("NOOFFSETS",))
BEFORE = Layout("before", 64, ())
LAYOUTS = {layout.name: layout for layout in (NOW, V2, BEFORE)}
OPTIONS = [
    Layout("v2 + NOFREQS", NOTE_LISTPACK_VALUE_BYTES, ("NOOFFSETS", "NOFREQS")),
    Layout(
        "v2 + NOFREQS + NOFIELDS",
        NOTE_LISTPACK_VALUE_BYTES,
        ("NOOFFSETS", "NOFREQS", "NOFIELDS"),
    ),
]


def _words(rng: random.Random) -> list[str]:
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(2000)]


@dataclass(frozen=True)
class Topics:
    """Which topic each note goes to: ``big`` notes of ``notes`` (spread evenly through the
    load) into the topic ``big``, the others in turn over ``spread`` topics ``t0``, ``t1``..."""

    notes: int
    big: int
    spread: int

    def is_big(self, i: int) -> bool:
        return (i + 1) * self.big // self.notes > i * self.big // self.notes

    def of(self, i: int) -> str:
        if self.is_big(i):
            return "big"
        # The big notes before note i are i * big // notes; the others are numbered on.
        return f"t{(i - i * self.big // self.notes) % self.spread}"

    def walked(self) -> tuple[str, int]:
        """The topic list_keys walks, and its notes: ``big`` if there is one, else ``t0``."""
        if self.big:
            return "big", self.big
        return "t0", -(-self.notes // self.spread)


# A word common in older notes and absent from the latest ones: a third of the first half of
# the notes, and a third of those from 150,000 to 30,000 writes before the end, hold it.
OLD_WORD = "oldtimerword"


def _holds_the_old_word(i: int, notes: int) -> bool:
    return i < notes // 2 or notes - 150_000 <= i < notes - 30_000


def _progress(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def load(
    url: str, layout: Layout, notes: int, body_bytes: int, topics: Topics, reads: Reads | None
) -> None:
    sync = redis.Redis.from_url(url)
    sync.flushall()
    sync.config_set("hash-max-listpack-value", layout.listpack_value)
    if layout.index_options is None:
        async with aioredis.Redis.from_url(url) as client:
            await ensure_index(RoutedClient(client, timeout_seconds=5.0))
    else:
        # An old layout's one index, under this version's name so that search finds it (the
        # probe's search then adds the digests index, after the measurement).
        sync.execute_command(
            "FT.CREATE", INDEX_NAME, "ON", "HASH", "PREFIX", 1, NOTE_PREFIX,
            *layout.index_options, *OLD_SCHEMA,
        )  # fmt: skip
    before = int(sync.info("memory")["used_memory"])
    rng = random.Random(7)
    words = _words(rng)
    drawn: Counter[str] = Counter()

    def text(size: int) -> str:
        out: list[str] = []
        length = 0
        while length < size:
            out.append(rng.choice(words))
            length += len(out[-1]) + 1
        drawn.update(out)
        return " ".join(out)[:size]

    # Not started: start() would add this version's indexes to an old layout.
    board = Board(client=board_client(url))
    started = time.monotonic()
    probe_digest, probe_body = "walrusdigest", "walrusbody"
    payload = 0
    written = 0

    def batch() -> Iterator[tuple[str, str, str, str]]:
        # The same notes for every layout: the generator is seeded and drawn in order (one
        # note at a time, so that a large board is not held in memory twice).
        nonlocal payload
        for i in range(notes):
            digest, body = text(80), text(body_bytes)
            if i == notes // 2:
                # One note carries a word of its own in its digest and another in its body.
                digest, body = digest[:60] + " " + probe_digest, body[:-12] + " " + probe_body
            elif i % 3 == 0 and _holds_the_old_word(i, notes):
                body = body[: -len(OLD_WORD) - 1] + " " + OLD_WORD
            payload += len(digest) + len(body)
            yield topics.of(i), f"n{i}", digest, body

    queue = batch()

    async def writer() -> None:
        nonlocal written
        for topic, name, digest, body in queue:
            await board.update_state(
                UpdateState.parse(
                    {"uri": f"bb://size/{topic}/{name}", "digest": digest, "body": body}
                ),
                author="sizer",
            )
            written += 1

    async def reporter() -> None:
        while True:
            await asyncio.sleep(30)
            elapsed = time.monotonic() - started
            used = int(sync.info("memory")["used_memory"]) - before
            _progress(
                f"{layout.name}: {written:,} of {notes:,} notes written in {elapsed:.0f} s"
                f" ({written / elapsed:.0f}/s), used_memory +{used / 2**20:,.0f} MiB"
            )

    report = asyncio.create_task(reporter())
    await asyncio.gather(*(writer() for _ in range(16)))
    report.cancel()
    if layout.index_options is not None:
        # The earlier versions also kept each topic's notes in one set by recency: the union
        # of its sets by kind, which this version's store no longer writes.
        for topic in {topics.of(i) for i in range(notes)}:
            kinds = [by_kind("size", topic, kind) for kind in KINDS]
            sync.zunionstore(by_recent("size", topic), kinds, aggregate="MAX")
    load_s = time.monotonic() - started
    indexes = [n.decode() for n in sync.execute_command("FT._LIST")]
    while any(int(sync.ft(n).info()["indexing"]) for n in indexes):
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    after = int(sync.info("memory")["used_memory"])
    index_bytes = sum(float(sync.ft(n).info()["total_index_memory_sz_mb"]) * 1e6 for n in indexes)
    # Every key's MEMORY USAGE (the value, its key and its entry in the keyspace), by the
    # family its name starts with.
    by_family: Counter[str] = Counter()
    pipe = sync.pipeline(transaction=False)
    families: list[str] = []

    def settle() -> None:
        for family, used in zip(families, pipe.execute(), strict=True):
            by_family[family] += used or 0
        families.clear()

    for key in sync.scan_iter(count=10_000):
        families.append(_family(key))
        pipe.memory_usage(key, samples=0)
        if len(families) == 10_000:
            settle()
    settle()
    notes_bytes = by_family["note"]
    other = after - before - index_bytes - notes_bytes
    uri = f"bb://size/{topics.of(notes // 2)}/n{notes // 2}"
    found_digest = any(
        i["uri"] == uri
        for i in (
            await board.search_keys(
                SearchKeys.parse({"q": probe_digest, "limit": 50}), workspace="size"
            )
        )["items"]
    )
    found_body = any(
        i["uri"] == uri
        for i in (
            await board.search_keys(
                SearchKeys.parse({"q": probe_body, "limit": 50}), workspace="size"
            )
        )["items"]
    )
    ratio = (after - before) / payload
    print(
        f"{layout.name:<26} {ratio:5.2f}x   notes {notes_bytes / payload:4.2f}x"
        f"  index {index_bytes / payload:4.2f}x  other {other / payload:4.2f}x"
        f" (topic sets {by_family['topic sets'] / payload:4.2f}x,"
        f" change log {by_family['change log'] / payload:4.2f}x)"
        f"   {(after - before) / notes:6.0f} B/note  loaded {notes / load_s:5.0f}/s"
        f"  search finds a digest word {'yes' if found_digest else 'NO'},"
        f" a body word {'yes' if found_body else 'NO'}",
        flush=True,
    )
    if reads is not None and layout is NOW:
        searchable = (w for w, _ in drawn.most_common() if query_terms(w) == [w])
        whole = Board(client=board_client(url), limits=BoardLimits(search_window=0))
        try:
            await measure_reads(
                sync, board, whole, reads, topics, probe_digest, next(searchable), OLD_WORD
            )
        finally:
            await whole.close()
    await board.close()
    sync.close()


def _family(key: bytes) -> str:
    """What a key of the board holds, from its name's prefix (store/connection/_key_names.py)."""
    if key.startswith(NOTE_PREFIX.encode()):
        return "note"
    prefix = key.split(b":", 1)[0]
    # (``bbtk:{ws}`` alone is the token inventory; a topic's set by kind names its topic.)
    if prefix in (b"bbtn", b"bbtv") or (prefix == b"bbtk" and key.count(b":") >= 3):
        return "topic sets"
    if prefix == b"bbc":
        return "change log"
    return "rest"


@dataclass(frozen=True)
class Reads:
    queries: int
    page_limit: int | None


def _ms(samples: list[float]) -> str:
    p50, p99 = median(samples), percentile(samples, 0.99)
    return f"p50 {p50 * 1e3:6.2f} ms  p99 {p99 * 1e3:6.2f} ms"


async def _timed(call: Callable[[], Awaitable[object]], times: int) -> list[float]:
    samples = []
    for _ in range(times):
        t0 = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t0)
    return samples


async def measure_reads(
    sync: redis.Redis,
    board: Board,
    whole: Board,
    reads: Reads,
    topics: Topics,
    rare: str,
    common: str,
    old: str,
) -> None:
    """Search and list_keys through the board, one call at a time, each call timed whole.

    ``whole`` is the same board with no search window: every match scored."""
    window = BoardLimits().search_window
    for label, word in (("rare", rare), ("common", common), ("old", old)):
        # How many notes hold the word (what the query must score), asked of Redis directly.
        query = Query(f"@ws:{{size}} ({word})").no_content().paging(0, 0).dialect(2)
        matches = [
            sync.ft(index).search(query).total for index in (INDEX_NAME, digest_index(INDEX_NAME))
        ]
        answers: dict[str, list[str]] = {}
        for scope, searched in ((f"window {window:,}", board), ("whole board", whole)):

            async def search(
                word: str = word,
                searched: Board = searched,
                scope: str = scope,
                answers: dict[str, list[str]] = answers,
            ) -> object:
                found = await searched.search_keys(SearchKeys.parse({"q": word}), workspace="size")
                answers[scope] = [item["uri"] for item in found["items"]]
                return found

            await _timed(search, 5)  # warm-up
            samples = await _timed(search, reads.queries)
            print(
                f"search_keys {label:<6} word {word!r:<12} {matches[0]:>9,} notes"
                f" ({matches[1]:,} digests), default limit, {scope:<13}, {reads.queries} calls:"
                f"  {_ms(samples)}",
                flush=True,
            )
        window_answer, whole_answer = answers.values()
        same = window_answer == whole_answer
        print(f"  the window's answer and the whole board's: {'the same' if same else 'differ'}")
    topic, expected = topics.walked()
    seen: Counter[str] = Counter()
    pages: list[float] = []
    after: str | None = None
    walk_started = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        page = await board.list_keys(
            ListKeys.parse({"topic": topic, "limit": reads.page_limit, "after": after}),
            workspace="size",
        )
        pages.append(time.perf_counter() - t0)
        seen.update(item["uri"] for item in page["items"])
        after = page.get("next")
        if after is None:
            break
        if len(pages) % 1000 == 0:
            _progress(f"list_keys: {len(pages):,} pages, {len(seen):,} notes")
    walk_s = time.perf_counter() - walk_started
    once = len(seen) == expected and all(n == 1 for n in seen.values())
    prefix = f"bb://size/{topic}/"
    print(
        f"list_keys topic {topic!r} ({expected:,} notes), limit {reads.page_limit or 'default'}:"
        f" {len(pages):,} pages,  {_ms(pages)} per page,  whole walk {walk_s:.1f} s;"
        f" every note once: {'yes' if once and all(u.startswith(prefix) for u in seen) else 'NO'}"
        f" ({len(seen):,} distinct, {sum(seen.values()):,} items)",
        flush=True,
    )


async def run(
    notes: int,
    body_bytes: int,
    layouts: list[Layout],
    topics: Topics,
    reads: Reads | None,
) -> None:
    with embedded_redis(append_only=False) as server:
        print(f"{notes:,} notes, body {body_bytes} B, digest 80 B; Redis used_memory / payload")
        if topics.big:
            print(
                f"topic 'big' holds {topics.big:,} notes, the other {notes - topics.big:,}"
                f" are spread over {topics.spread} topics",
                flush=True,
            )
        for layout in layouts:
            await load(server.url, layout, notes, body_bytes, topics, reads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=3000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--options", action="store_true", help="also each further index option")
    parser.add_argument(
        "--layouts",
        default="before,v2,now",
        help="the layouts to load, in order, comma-separated (of: now, v2, before)",
    )
    parser.add_argument("--topics", type=int, default=5, help="topics the notes go to in turn")
    parser.add_argument(
        "--big-topic-notes", type=int, default=0, help="notes of the one topic 'big' (0: none)"
    )
    parser.add_argument("--queries", type=int, default=200, help="search calls per word")
    parser.add_argument("--page-limit", type=int, default=None, help="list_keys limit per page")
    parser.add_argument("--no-reads", action="store_true", help="skip search and list_keys")
    args = parser.parse_args()
    try:
        layouts = [LAYOUTS[name.strip()] for name in args.layouts.split(",")]
    except KeyError as exc:
        parser.error(f"unknown layout {exc}; the layouts are {', '.join(LAYOUTS)}")
    if not 0 <= args.big_topic_notes <= args.notes:
        parser.error("--big-topic-notes must be from 0 to --notes")
    topics = Topics(args.notes, args.big_topic_notes, args.topics)
    reads = None if args.no_reads else Reads(args.queries, args.page_limit)
    asyncio.run(
        run(
            args.notes,
            args.body_bytes,
            [*layouts, *(OPTIONS if args.options else [])],
            topics,
            reads,
        )
    )


if __name__ == "__main__":
    main()
