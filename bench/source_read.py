"""What the worker thread costs a source_path read (issue 12).

Since the file is now opened and read off the event loop (store/sources/_source_reader.py: one
daemon thread per read, a deadline, at most N at once), each read pays for a thread start
and two hops between the loop and the thread. This measures, for one small and one larger
file under a source root, the time per ``summarize_source`` called directly on the loop
(what the code did before) and through ``SourceReader`` (what it does now), sequentially
(latency) and with 8 concurrent callers (throughput), interleaved over several rounds so
the shared machine's drift hits all alike. A third column starts a new thread per read,
the design SourceReader's kept threads replaced. Nothing touches Redis: the write that follows
a read is the same either way.

    python bench/source_read.py [--reads 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from _harness import Figures, median, rounds, scratch

from blackboard_mcp.store.sources._source import summarize_source
from blackboard_mcp.store.sources._source_reader import SourceReader

MAX_BYTES = 5 * 1024 * 1024
CONCURRENCY = 8


def make_files(root: Path) -> dict[str, str]:
    small = "# Notes\n\n" + "".join(f"- line {i}: otters hold hands\n" for i in range(60))
    large = "# Log\n\n" + "".join(f"{i}\tan event that happened\n" for i in range(40_000))
    (root / "small.md").write_text(small)
    (root / "large.txt").write_text(large)
    return {
        "small.md": f"{len(small.encode()) / 1024:.1f} KB",
        "large.txt": f"{len(large.encode()) / 1024:.0f} KB",
    }


async def on_new_thread(name: str, root: Path) -> object:
    loop = asyncio.get_running_loop()
    result: asyncio.Future[object] = loop.create_future()

    def work() -> None:
        summary = summarize_source(name, root=root, max_bytes=MAX_BYTES)
        loop.call_soon_threadsafe(result.set_result, summary)

    threading.Thread(target=work, daemon=True).start()
    return await result


async def run(call: Callable[[], Awaitable[object]], reads: int, concurrency: int) -> float:
    """Microseconds per read for ``reads`` reads spread over ``concurrency`` tasks."""
    per_task = reads // concurrency

    async def worker() -> None:
        for _ in range(per_task):
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.perf_counter() - started) / (per_task * concurrency) * 1e6


async def main(reads: int, rounds_count: int) -> None:
    with scratch("bench-sources-") as root:
        sizes = make_files(root)
        reader = SourceReader(root=root, max_bytes=MAX_BYTES, timeout_seconds=10.0)
        print(
            f"{reads} reads per cell, median of {rounds_count} interleaved rounds "
            "(microseconds/read)"
        )
        print("| file | callers | on the loop | new thread per read | SourceReader | added |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, size in sizes.items():
            n = reads if name == "small.md" else max(reads // 50, CONCURRENCY)

            async def direct(name: str = name) -> object:
                return summarize_source(name, root=root, max_bytes=MAX_BYTES)

            async def threaded(name: str = name) -> object:
                return await reader.summarize(name)

            async def new_thread(name: str = name) -> object:
                return await on_new_thread(name, root)

            for callers in (1, CONCURRENCY):
                paths = {"direct": direct, "new": new_thread, "reader": threaded}
                cells: Figures[str, float] = Figures()
                for call in paths.values():  # warm caches and start the reader's threads
                    await run(call, max(n // 10, callers), callers)
                for _, order in rounds(rounds_count, list(paths.items())):
                    for key, call in order:
                        cells.add(key, await run(call, n, callers))
                on_loop, new, pooled = (median(cells[key]) for key in paths)
                print(
                    f"| {name} ({size}) | {callers} | {on_loop:.0f} | {new:.0f} | {pooled:.0f} "
                    f"| {pooled - on_loop:+.0f} ({(pooled / on_loop - 1) * 100:+.0f}%) |"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.reads, args.rounds))
