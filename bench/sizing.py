"""Redis memory per note against the payload, for the index and hash layouts side by side.

Writes N notes (a digest of about 80 bytes and a body of ``--body-bytes`` of random words from
a 2,000-word vocabulary, over 5 topics) through the store, then prints Redis's used_memory
growth against the payload bytes (digest + body), split into the note hashes, the search index
and the rest (the topic listings and the change log), and checks that search still finds a
note by a word of its digest and by a word of its body. Each layout is loaded into the same
emptied Redis in turn, in one run:

- ``now``: this version: a notes index of document ids only (no term offsets, frequencies or
  field flags) beside a digests index, notes kept as listpacks.
- ``v2``: the one index of the previous release (without term offsets, the digest weighted 5).
- ``before``: that index with term offsets, each note a hash table (Redis's default
  ``hash-max-listpack-value`` of 64 bytes), as the first release stored them.
- with ``--options``, ``v2`` plus further options of its one index, to show what each saves;
  what each one costs is in docs/operations.md ("Search index options").

The old layouts' notes are written by this version's store, plus the per-topic sets by
recency that the earlier versions also kept (this version merges the sets by kind instead).

    python bench/sizing.py [--notes 3000] [--body-bytes 1024] [--options]
    python bench/sizing.py --notes 100000      # the issue's size; about 10 minutes here
"""

from __future__ import annotations

import argparse
import asyncio
import random
import string
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis
import redis.asyncio as aioredis

from blackboard_mcp.store import Board, EmbeddedRedis, board_client
from blackboard_mcp.store._embedded import NOTE_LISTPACK_VALUE_BYTES
from blackboard_mcp.store._index import ensure_index
from blackboard_mcp.store._keys import INDEX_NAME, NOTE_PREFIX, by_kind, by_recent
from blackboard_mcp.store._notes import KINDS

# The fields of the single index of the first two releases: the digest weighted 5, the update
# time sortable.
OLD_SCHEMA = (
    "SCHEMA", "ws", "TAG", "topic", "TAG", "kind", "TAG", "digest", "TEXT", "WEIGHT", "5.0",
    "body", "TEXT", "stext", "TEXT", "updated", "NUMERIC", "SORTABLE",
)  # fmt: skip


@dataclass(frozen=True)
class Layout:
    name: str
    listpack_value: int
    # The old single index's options; None: this version's indexes (store/_index.py).
    index_options: tuple[str, ...] | None


NOW = Layout("now", NOTE_LISTPACK_VALUE_BYTES, None)
V2 = Layout("v2", NOTE_LISTPACK_VALUE_BYTES, ("NOOFFSETS",))
BEFORE = Layout("before", 64, ())
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


async def load(url: str, layout: Layout, notes: int, body_bytes: int) -> None:
    sync = redis.Redis.from_url(url)
    sync.flushall()
    sync.config_set("hash-max-listpack-value", layout.listpack_value)
    if layout.index_options is None:
        async with aioredis.Redis.from_url(url) as client:
            await ensure_index(client)
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

    def text(size: int) -> str:
        out: list[str] = []
        length = 0
        while length < size:
            out.append(rng.choice(words))
            length += len(out[-1]) + 1
        return " ".join(out)[:size]

    # Not started: start() would add this version's indexes to an old layout.
    board = Board(client=board_client(url))
    started = time.monotonic()
    # The same notes for every layout: the generator is seeded and drawn in order.
    batch = [(f"n{i}", text(80), text(body_bytes)) for i in range(notes)]
    # One note carries a word of its own in its digest and another in its body.
    name, digest, body = batch[notes // 2]
    batch[notes // 2] = (name, digest[:60] + " walrusdigest", body[:-12] + " walrusbody")
    probe_digest, probe_body = "walrusdigest", "walrusbody"
    payload = sum(len(d) + len(b) for _, d, b in batch)
    queue = iter(batch)

    async def writer() -> None:
        for name, digest, body in queue:
            topic = f"t{int(name[1:]) % 5}"
            await board.update_state(
                author="sizer", uri=f"bb://size/{topic}/{name}", digest=digest, body=body
            )

    await asyncio.gather(*(writer() for _ in range(16)))
    if layout.index_options is not None:
        # The earlier versions also kept each topic's notes in one set by recency: the union
        # of its sets by kind, which this version's store no longer writes.
        for topic in {f"t{i % 5}" for i in range(notes)}:
            kinds = [by_kind("size", topic, kind) for kind in KINDS]
            sync.zunionstore(by_recent("size", topic), kinds, aggregate="MAX")
    load_s = time.monotonic() - started
    indexes = [n.decode() for n in sync.execute_command("FT._LIST")]
    while any(int(sync.ft(n).info()["indexing"]) for n in indexes):
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    after = int(sync.info("memory")["used_memory"])
    index_bytes = sum(float(sync.ft(n).info()["total_index_memory_sz_mb"]) * 1e6 for n in indexes)
    notes_bytes = sum(
        sync.memory_usage(key, samples=0) or 0
        for key in sync.scan_iter(match=f"{NOTE_PREFIX}*", count=10_000)
    )
    other = after - before - index_bytes - notes_bytes
    uri = f"bb://size/t{(notes // 2) % 5}/n{notes // 2}"
    found_digest = any(
        i["uri"] == uri
        for i in (await board.search_keys(workspace="size", q=probe_digest, limit=50))["items"]
    )
    found_body = any(
        i["uri"] == uri
        for i in (await board.search_keys(workspace="size", q=probe_body, limit=50))["items"]
    )
    await board.close()
    sync.close()
    ratio = (after - before) / payload
    print(
        f"{layout.name:<26} {ratio:5.2f}x   notes {notes_bytes / payload:4.2f}x"
        f"  index {index_bytes / payload:4.2f}x  other {other / payload:4.2f}x"
        f"   {(after - before) / notes:6.0f} B/note  loaded {notes / load_s:5.0f}/s"
        f"  search finds a digest word {'yes' if found_digest else 'NO'},"
        f" a body word {'yes' if found_body else 'NO'}",
        flush=True,
    )


async def run(notes: int, body_bytes: int, options: bool) -> None:
    layouts = [BEFORE, V2, NOW, *(OPTIONS if options else [])]
    with tempfile.TemporaryDirectory() as data, EmbeddedRedis(data_dir=Path(data)) as server:
        redis.Redis.from_url(server.url).config_set("appendonly", "no")
        print(f"{notes:,} notes, body {body_bytes} B, digest 80 B; Redis used_memory / payload")
        for layout in layouts:
            await load(server.url, layout, notes, body_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=3000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--options", action="store_true", help="also each further index option")
    args = parser.parse_args()
    asyncio.run(run(args.notes, args.body_bytes, args.options))


if __name__ == "__main__":
    main()
