"""The note hashes' memory under this release's short field names against the earlier long
ones, side by side in one run, and how fast a start converts a board of the earlier layout.

Writes N notes through the store (a digest of about 80 bytes and a body of ``--body-bytes``
of random words, over 5 topics; each note written twice, so that each keeps one past
version), then:

1. sums ``MEMORY USAGE`` over the note hashes and the kept versions as this release stores
   them;
2. rewrites every one of them as the earlier layout stored it (each field under its long
   name, the note's address in ``uri``) and sums again;
3. runs the start's conversion (store/connection/_field_layout.py) on that board, timed (as
   at a start, before this release's search indexes exist), and sums a third time (it must
   match the first).

    python bench/field_layout.py [--notes 20000] [--body-bytes 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import string
import time

import redis
import redis.asyncio as aioredis
from _harness import embedded_redis

from blackboard_mcp.store import Board, UpdateState, board_client
from blackboard_mcp.store.connection import _key_names as keys
from blackboard_mcp.store.connection._board_client import RoutedClient
from blackboard_mcp.store.connection._field_layout import convert_field_layout
from blackboard_mcp.store.connection._field_names import LONG_NAMES

WS = "layout"


def _text(rng: random.Random, words: list[str], size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        out.append(rng.choice(words))
        length += len(out[-1]) + 1
    return " ".join(out)[:size]


async def _load(url: str, notes: int, body_bytes: int) -> int:
    """Writes the notes; returns the payload (digest and body bytes of the current versions)."""
    rng = random.Random(7)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(2000)]
    board = Board(client=board_client(url))
    await board.start()
    payload = 0
    queue = [(f"t{i % 5}", f"n{i}") for i in range(notes)] * 2

    async def writer() -> None:
        nonlocal payload
        while queue:
            topic, name = queue.pop()
            digest, body = _text(rng, words, 80), _text(rng, words, body_bytes)
            await board.update_state(
                UpdateState.parse(
                    {"uri": f"bb://{WS}/{topic}/{name}", "digest": digest, "body": body}
                ),
                author="sizer",
            )
            payload += len(digest) + len(body)

    await asyncio.gather(*(writer() for _ in range(16)))
    await board.close()
    return payload // 2


def _hash_keys(client: redis.Redis) -> dict[str, list[bytes]]:
    return {
        prefix: list(client.scan_iter(match=f"{prefix}*", count=5000))
        for prefix in (keys.NOTE_PREFIX, keys.VERSION_PREFIX)
    }


def _memory(client: redis.Redis, names: list[bytes]) -> int:
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.memory_usage(name, samples=0)
    return sum(int(n or 0) for n in pipe.execute())


def _to_earlier_layout(client: redis.Redis, found: dict[str, list[bytes]]) -> None:
    for prefix, names in found.items():
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            pipe = client.pipeline(transaction=False)
            for name in chunk:
                pipe.hgetall(name)
            stored = pipe.execute()
            pipe = client.pipeline(transaction=False)
            for name, fields in zip(chunk, stored, strict=True):
                earlier = {LONG_NAMES[k.decode()]: v for k, v in fields.items()}
                if prefix == keys.NOTE_PREFIX:
                    earlier["uri"] = f"bb://{WS}/{name.decode().split('}:', 1)[1]}".encode()
                pipe.delete(name)
                pipe.hset(name, mapping=earlier)  # type: ignore[arg-type]
            pipe.execute()
    client.delete(keys.field_layout())
    # A board of the earlier release had neither of this release's indexes: a start converts
    # before it creates them (store/connection/_placement.py), so the conversion re-indexes
    # nothing.
    client.execute_command("FT.DROPINDEX", keys.INDEX_NAME)
    client.execute_command("FT.DROPINDEX", keys.digest_index(keys.INDEX_NAME))


async def _convert(url: str) -> tuple[int, float]:
    async with aioredis.Redis.from_url(url) as client:
        started = time.perf_counter()
        converted = await convert_field_layout(RoutedClient(client, timeout_seconds=30.0))
        return converted, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=20000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    args = parser.parse_args()
    with embedded_redis(append_only=False) as server:
        payload = asyncio.run(_load(server.url, args.notes, args.body_bytes))
        client = redis.Redis.from_url(server.url)
        found = _hash_keys(client)
        notes, kept = found[keys.NOTE_PREFIX], found[keys.VERSION_PREFIX]
        now = (_memory(client, notes), _memory(client, kept))
        _to_earlier_layout(client, found)
        earlier = (_memory(client, notes), _memory(client, kept))
        converted, seconds = asyncio.run(_convert(server.url))
        after = (_memory(client, notes), _memory(client, kept))
        client.close()
    print(f"{len(notes):,} notes and {len(kept):,} kept versions, payload {payload:,} bytes")
    print("| layout | note hashes / payload | bytes a note | bytes a kept version |")
    print("|---|---:|---:|---:|")
    for name, (n, k) in (("earlier (long names, uri)", earlier), ("this release", now)):
        print(f"| {name} | {n / payload:.2f}x | {n / len(notes):,.0f} | {k / len(kept):,.0f} |")
    print(
        f"conversion at start: {converted:,} hashes in {seconds:.2f} s, "
        f"{converted / seconds:,.0f} a second; after it the notes take "
        f"{after[0] / len(notes):,.0f} bytes each (this release's layout: "
        f"{now[0] / len(notes):,.0f})"
    )


if __name__ == "__main__":
    main()
