"""What reading one version costs: get_state through the store, this checkout against revisions.

A read fetches a note's fields, then the content of what the budget shows; since content is
checked against the version its fields name (store/reads/_reads.py), the second round trip
reads a body with its version. This bench measures that cost side by side with earlier
revisions of the package, in one run on one embedded Redis, with no writer running (the
common case: nothing moves between the two round trips, nothing is read again).

Cells: get_state of 10 notes of 300 bytes in mode full; of 1 note of 20 KB (a blob) in mode
full; of 10 notes in mode digest (no content: unchanged path, a control), read again and
again, and fresh (rewritten with new digests before each read, which alone is timed); of 1
note with 50 ``cites`` links to notes written since (full mode: its links, and where the
revision records link versions a warning per cited note, store/notes/_provenance.py). Each
revision runs in a process of its own (``PYTHONPATH`` at the revision's package, extracted
with ``git archive``), one call at a time, for ``--seconds`` per cell; rounds alternate the
revisions' order. Prints calls/s and CPU ms per call of each, and each revision's ratio to
this checkout.

    python bench/read_versions.py [--seconds 3] [--rounds 3] --against REV [--against REV]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _harness import (
    Figures,
    embedded_redis,
    revision_table,
    revisions,
    rounds,
    run_in_revision,
)

CELLS = (
    "10 x 300 B, full",
    "1 x 20 KB, full",
    "10 digests",
    "10 fresh digests",
    "1 note, 50 links, full",
)

# Runs inside each revision's process: writes its notes once, then loops one cell.
_WORKER = r"""
import asyncio, json, os, resource, sys, time
from blackboard_mcp.store import Board, GetState, LinkState, UpdateState, board_client

url, ws, cell, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

async def main():
    board = Board(client=board_client(url))
    await board.start()
    small = [f"bb://{ws}/t/small-{i}" for i in range(10)]
    big = f"bb://{ws}/t/big"
    for uri in small:
        await board.update_state(UpdateState.parse(
            {"uri": uri, "digest": "a small note", "body": "word " * 60}), author="bench")
    await board.update_state(UpdateState.parse(
        {"uri": big, "digest": "a large note", "body": "word " * 4000}), author="bench")
    # A note citing 50 others, each written again since: a warning per other note where the
    # board records link versions.
    hub = f"bb://{ws}/t/hub"
    cited = [f"bb://{ws}/c/n{i}" for i in range(50)]
    await board.update_state(UpdateState.parse(
        {"uri": hub, "digest": "a note with many links", "body": "word " * 60}), author="bench")
    for uri in cited:
        await board.update_state(UpdateState.parse(
            {"uri": uri, "digest": "cited", "body": "v1"}), author="bench")
    await board.link_state(LinkState.parse({"src": hub, "rel": "cites", "dst": cited}),
        author="bench")
    for uri in cited:
        await board.update_state(UpdateState.parse(
            {"uri": uri, "digest": "cited", "body": "v2"}), author="bench")
    shapes = {
        "10 x 300 B, full": {"uris": small, "mode": "full", "budget_tokens": 20000},
        "1 x 20 KB, full": {"uris": [big], "mode": "full", "budget_tokens": 20000},
        "10 digests": {"uris": small},
        "10 fresh digests": {"uris": small},
        "1 note, 50 links, full": {"uris": [hub], "mode": "full", "budget_tokens": 20000},
    }
    request = GetState.parse(shapes[cell])
    for _ in range(50):
        await board.get_state(request)
    if cell == "10 fresh digests":
        # Each read's notes rewritten just before it, new digests each time: what a fleet
        # mostly reads. Only the reads are timed.
        calls, start, wall, used = 0, time.perf_counter(), 0.0, 0.0
        while time.perf_counter() - start < seconds:
            for i, uri in enumerate(small):
                await board.update_state(UpdateState.parse({"uri": uri, "body": "word " * 60,
                    "digest": f"note {i} at step {calls}: lag {calls % 97} ms"}), author="bench")
            began, before = time.perf_counter(), cpu()
            await board.get_state(request)
            wall, used = wall + time.perf_counter() - began, used + cpu() - before
            calls += 1
        await board.close()
        print(json.dumps({"calls_per_s": calls / wall, "cpu_ms": 1000 * used / calls}))
        return
    calls, start, used = 0, time.perf_counter(), cpu()
    while time.perf_counter() - start < seconds:
        await board.get_state(request)
        calls += 1
    elapsed, used = time.perf_counter() - start, cpu() - used
    await board.close()
    print(json.dumps({"calls_per_s": calls / elapsed, "cpu_ms": 1000 * used / calls}))

asyncio.run(main())
"""


def run_cell(
    url: str, tree: Path | None, label: str, cell: str, seconds: float
) -> dict[str, float]:
    ws = "bench-" + "".join(c for c in label.lower() if c.isalnum())[:12]
    return run_in_revision(tree, _WORKER, url, ws, cell, str(seconds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    parser.add_argument(
        "--cell",
        action="append",
        choices=CELLS,
        help="measure only this cell (repeatable); every cell without it",
    )
    args = parser.parse_args()
    cells = tuple(args.cell or CELLS)
    started = time.strftime("%Y-%m-%d %H:%M")
    measured: Figures[tuple[str, str], dict[str, float]] = Figures()
    with revisions(args.against) as trees, embedded_redis() as redis:
        for _, order in rounds(args.rounds, trees):
            for cell in cells:
                for label, tree in order:
                    result = run_cell(redis.url, tree, label, cell, args.seconds)
                    measured.add((label, cell), result)
    print(
        f"get_state through the store, one call at a time; {args.seconds:g} s per cell, "
        f"median of {args.rounds} rounds, revisions' order alternating; started {started}"
    )
    columns = [("calls/s", "calls_per_s", ".0f"), ("CPU ms/call", "cpu_ms", ".3f")]
    labels = [label for label, _ in trees]
    print("\n".join(revision_table(measured, cells, labels, columns, against_this="calls_per_s")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
