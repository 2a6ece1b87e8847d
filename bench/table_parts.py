"""What parts of a large table cost: one part against a hundred in one call, and what a small
read waits meanwhile, this checkout against revisions.

A table of 2 columns and 10,000 rows (about 1 MB of TSV, offloaded to a blob) is read as
parts, ``...@1#<offset>`` at row starts, in mode ``fields`` with one column chosen, at the
default budget: once a part alone, then 100 parts in one call. The ratio of the two is what a
hundred parts cost beside one. A second task in the same process meanwhile reads one small
note again and again; its latency while the part reads run, against the same reads alone,
is how long a call is held up by another's parts (the store parses on the event loop).
Each revision runs in a process of its own on one embedded Redis (``PYTHONPATH`` at the
revision's package, extracted with ``git archive``).

    python bench/table_parts.py [--seconds 3] [--against REV]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from _harness import embedded_redis, median, percentile, revisions, run_in_revision

_WORKER = r"""
import asyncio, json, statistics, sys, time
from blackboard_mcp.store import Board, GetState, UpdateState, board_client

url, ws, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])

async def timed(board, request, until):
    spent = []
    while time.perf_counter() < until:
        began = time.perf_counter()
        await board.get_state(request)
        spent.append(time.perf_counter() - began)
    return spent

async def main():
    board = Board(client=board_client(url))
    await board.start()
    table, small = f"bb://{ws}/t/bigtbl", f"bb://{ws}/t/small"
    rows = [[f"key-{i:05d}-" + "k" * 30, f"value {i} " + "v" * 40] for i in range(10_000)]
    await board.update_state(UpdateState.parse(
        {"uri": table, "digest": "a large table", "columns": ["key", "value"], "rows": rows}),
        author="bench")
    await board.update_state(UpdateState.parse(
        {"uri": small, "digest": "a small note", "body": "word " * 40}), author="bench")
    # Row starts in the stored TSV: the header line, then each row's line.
    starts, at = [], len("key\tvalue\n".encode())
    for row in rows:
        starts.append(at)
        at += len("\t".join(row).encode()) + 1
    picked = starts[:: len(starts) // 100][:100]
    def parts(offsets):
        return GetState.parse({"uris": [f"{table}@1#{o}" for o in offsets], "mode": "fields",
                               "fields": ["value"]})
    one, hundred = parts(picked[50:51]), parts(picked)
    little = GetState.parse({"uris": [small], "mode": "full"})
    for request in (one, hundred, little):
        for _ in range(3):
            await board.get_state(request)
    out = {}
    for name, request in (("one part", one), ("100 parts", hundred)):
        out[name] = statistics.median(await timed(board, request, time.perf_counter() + seconds))
    alone = await timed(board, little, time.perf_counter() + seconds)
    until = time.perf_counter() + seconds
    beside, _ = await asyncio.gather(timed(board, little, until), timed(board, hundred, until))
    out["small alone"], out["small beside"] = alone, beside
    await board.close()
    print(json.dumps(out))

asyncio.run(main())
"""


def run(url: str, tree: Path | None, label: str, seconds: float) -> dict[str, Any]:
    """The medians of one part and of 100 parts (seconds), and the small note's latencies
    alone and beside the 100 parts (seconds each)."""
    ws = "bench-" + "".join(c for c in label.lower() if c.isalnum())[:12]
    return run_in_revision(tree, _WORKER, url, ws, str(seconds))


def _spread(latencies: list[float]) -> str:
    """p50/p99/max in milliseconds."""
    figures = (median(latencies), percentile(latencies, 0.99), max(latencies))
    return "/".join(f"{1000 * figure:.1f}" for figure in figures)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    args = parser.parse_args()
    with revisions(args.against) as trees, embedded_redis() as redis:
        measured = {label: run(redis.url, tree, label, args.seconds) for label, tree in trees}
    print(
        f"parts of a 10,000-row, 2-column table (~1 MB, offloaded), mode fields, one column, "
        f"budget 2,000; {args.seconds:g} s per measure; started {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        f"{'revision':<14} {'1 part ms':>10} {'100 parts ms':>13} {'ratio':>7} "
        f"{'small p50/p99/max alone ms':>28} {'beside 100 parts ms':>22}"
    )
    for label, m in measured.items():
        alone, beside = _spread(m["small alone"]), _spread(m["small beside"])
        print(
            f"{label:<14} {1000 * m['one part']:>10.2f} {1000 * m['100 parts']:>13.2f} "
            f"{m['100 parts'] / m['one part']:>7.1f} {alone:>28} {beside:>22}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
