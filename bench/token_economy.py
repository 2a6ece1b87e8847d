"""Tokens an agent spends: list_keys table mode vs the same rows as JSON (digest mode), and
a catch-up by digests within a budget vs full reads. Counted with the offline tokenizer.

    python bench/token_economy.py [--notes 200]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
from pathlib import Path

import orjson
import redis.asyncio as aioredis

from blackboard_mcp.store import Board, EmbeddedRedis, TiktokenCounter

TOPICS = ["research", "plans", "data", "reviews", "run"]


async def run(notes: int) -> None:
    rng = random.Random(11)
    counter = TiktokenCounter()
    vocabulary = [
        "latency",
        "cache",
        "shard",
        "replica",
        "index",
        "budget",
        "token",
        "agent",
        "plan",
        "finding",
        "risk",
        "metric",
        "table",
        "review",
        "design",
        "query",
        "write",
        "read",
        "merge",
        "conflict",
    ]
    with tempfile.TemporaryDirectory() as data, EmbeddedRedis(data_dir=Path(data)) as server:
        board = Board(client=aioredis.Redis.from_url(server.url))
        await board.start()
        uris = []
        for i in range(notes):
            topic = TOPICS[i % len(TOPICS)]
            uri = f"bb://demo/{topic}/note-{i}"
            uris.append(uri)
            digest = " ".join(rng.choices(vocabulary, k=12))
            body = "\n".join(" ".join(rng.choices(vocabulary, k=14)) for _ in range(30))
            await board.update_state(author="gen", uri=uri, digest=digest, body=body)
        listing_json = await board.list_keys(
            workspace="demo", topic="research", limit=40, mode="digest", budget_tokens=100_000
        )
        listing_table = await board.list_keys(
            workspace="demo", topic="research", limit=40, mode="table", budget_tokens=100_000
        )
        digests = await board.get_state(uris=uris[:100], mode="digest", budget_tokens=100_000)
        full = await board.get_state(uris=uris[:100], mode="full", budget_tokens=100_000)
        await board.close()
    real = [
        counter.count(orjson.dumps(r).decode())
        for r in (listing_json, listing_table, digests, full)
    ]
    print(
        f"list_keys 40 rows, JSON items: {real[0]} tokens; table mode: {real[1]} tokens; "
        f"table/JSON = {real[1] / real[0]:.2f}"
    )
    print(
        f"catch-up on 100 notes, digests: {real[2]} tokens; full reads: {real[3]} tokens; "
        f"digest/full = {real[2] / real[3]:.3f}"
    )
    print(
        f"spent_tokens reported vs counted: {listing_table['spent_tokens']}/{real[1]}, "
        f"{digests['spent_tokens']}/{real[2]}, {full['spent_tokens']}/{real[3]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=200)
    asyncio.run(run(parser.parse_args().notes))


if __name__ == "__main__":
    main()
