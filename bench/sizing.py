"""Redis memory per note: writes N notes of a given body size through the store and prints
used_memory growth per 1,000 notes beside the payload bytes (ratio), and notes per GiB.

    python bench/sizing.py [--notes 5000] [--body-bytes 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import string
import tempfile
from pathlib import Path

import redis.asyncio as aioredis

from blackboard_mcp.store import Board, EmbeddedRedis


async def run(notes: int, body_bytes: int) -> None:
    rng = random.Random(7)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(2000)]

    def text(size: int) -> str:
        out: list[str] = []
        while sum(len(w) + 1 for w in out) < size:
            out.append(rng.choice(words))
        return " ".join(out)[:size]

    with tempfile.TemporaryDirectory() as data, EmbeddedRedis(data_dir=Path(data)) as server:
        client = aioredis.Redis.from_url(server.url)
        board = Board(client=client)
        await board.start()
        before = int((await client.info("memory"))["used_memory"])
        payload = 0
        for i in range(notes):
            digest = text(80)
            body = text(body_bytes)
            payload += len(digest) + len(body)
            await board.update_state(
                author="sizer",
                uri=f"bb://size/t{i % 5}/n{i}",
                digest=digest,
                body=body,
                expect_version=0,
            )
        await asyncio.sleep(0.5)
        after = int((await client.info("memory"))["used_memory"])
        await board.close()
    per_thousand = (after - before) / notes * 1000
    print(f"notes: {notes}, body {body_bytes} B, digest 80 B")
    print(
        f"Redis memory per 1,000 notes: {per_thousand / 1e6:.2f} MB "
        f"(payload {payload / notes * 1000 / 1e6:.2f} MB): "
        f"{(after - before) / payload:.2f}x the payload"
    )
    print(f"notes per GiB of Redis memory: {int(2**30 / ((after - before) / notes)):,}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=5000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    args = parser.parse_args()
    asyncio.run(run(args.notes, args.body_bytes))


if __name__ == "__main__":
    main()
