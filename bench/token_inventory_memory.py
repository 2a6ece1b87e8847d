"""What the token inventory costs Redis: bytes per recorded token, measured with MEMORY USAGE.

Records ``--tokens`` tokens (two read topics, one write topic, two capabilities, a day to
live) of one workspace through the inventory the gateway uses, marks each as used, and
prints the memory of the workspace's three inventory keys divided by the number of tokens.

    python bench/token_inventory_memory.py [--tokens 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import redis
from _harness import embedded_redis

from blackboard_mcp._token_records import RecordedTokens
from blackboard_mcp.auth import TokenRecord
from blackboard_mcp.store import RedisTokenInventory, board_client

WORKSPACE = "bench"
KEYS = (f"bbtk:{{{WORKSPACE}}}", f"bbtkx:{{{WORKSPACE}}}", f"bbtku:{{{WORKSPACE}}}")


async def fill(url: str, count: int) -> None:
    client = board_client(url)
    inventory = RecordedTokens(RedisTokenInventory(client=client))
    now = time.time()
    for i in range(count):
        await inventory.record(
            TokenRecord(
                token_id=uuid.uuid4().hex,
                subject=f"agent-{i:05d}",
                workspace=WORKSPACE,
                read=("research", "plan"),
                write=("research",),
                capabilities=("board_read", "board_write"),
                secrets=(),
                issued_at=now,
                expires_at=now + 86400,
                issued_by="admin",
            )
        )
    await client.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000)
    args = parser.parse_args()
    with embedded_redis() as server:
        asyncio.run(fill(server.url, args.tokens))
        plain = redis.Redis.from_url(server.url)
        # Each token used once: its last-use entry too.
        for token_id in plain.hkeys(KEYS[0]):
            plain.hset(KEYS[2], token_id, int(time.time()))
        total = sum(int(plain.memory_usage(k, samples=0) or 0) for k in KEYS)
        plain.close()
    print(f"{args.tokens} tokens recorded and used: {total / args.tokens:.0f} bytes per token")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
