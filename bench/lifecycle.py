"""How long the data lifecycle takes per note: export, import, a topic's delete and a
retention sweep, through the store against an embedded Redis of the bench's own.

    python bench/lifecycle.py [--notes 2000] [--offloaded-every 10]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import orjson
from _harness import embedded_redis, scratch

from blackboard_mcp.store import (
    Board,
    ExportFile,
    LinkState,
    UpdateState,
    board_client,
    export_header,
)


async def run(notes: int, offloaded_every: int) -> None:
    with scratch("bench-lifecycle-") as work, embedded_redis(work / "redis") as server:
        board = Board(client=board_client(server.url))
        await board.start()
        for i in range(notes):
            big = offloaded_every and i % offloaded_every == 0
            body = (f"large body {i} " * 1200) if big else f"body {i}"
            await board.update_state(
                UpdateState.parse(
                    {"uri": f"bb://src/t{i % 4}/n{i}", "digest": f"note {i}", "body": body}
                ),
                author="bench",
            )
            if i:
                await board.link_state(
                    LinkState.parse(
                        {
                            "src": f"bb://src/t{i % 4}/n{i}",
                            "rel": "cites",
                            "dst": [f"bb://src/t{(i - 1) % 4}/n{i - 1}"],
                        }
                    ),
                    author="bench",
                )

        started = time.perf_counter()
        records = [r async for r in board.export_notes("src")]
        exported = time.perf_counter() - started

        dump = work / "export.jsonl"
        with dump.open("wb") as out:
            out.write(orjson.dumps(export_header("src", notes, "now")) + b"\n")
            out.writelines(orjson.dumps(r) + b"\n" for r in records)

        # As `blackboard-mcp import` does: a pass to check the file, then one for the notes
        # and one for the links, each reading it a line at a time.
        started = time.perf_counter()
        with ExportFile.open(str(dump), max_line_bytes=8 * 1024 * 1024) as export:
            export.check("dst")
            report = await board.import_notes(
                export.records, workspace="dst", replace=False, author="b"
            )
        imported = time.perf_counter() - started
        assert report.imported == notes

        per_topic = notes // 4
        started = time.perf_counter()
        gone = await board.delete(author="bench", workspace="dst", topic="t0")
        deleted = time.perf_counter() - started
        assert gone.count == per_topic

        await board.set_retention(workspace="src", max_age_seconds=1)
        await asyncio.sleep(1.1)
        started = time.perf_counter()
        swept = await board.sweep_retention(owner="bench", lease_seconds=60)
        sweeping = time.perf_counter() - started
        assert swept is not None and sum(len(s.members) for s in swept) == notes
        await board.close()

    def rate(count: int, seconds: float) -> str:
        return f"{seconds:.2f} s, {count / seconds:,.0f} notes/s"

    print(f"notes: {notes} in 4 topics, 1 in {offloaded_every} offloaded (~14 KB), each linked")
    print(f"export (store side, no JSON encoding): {rate(notes, exported)}")
    print(f"import from a file (check, notes, links): {rate(notes, imported)}")
    print(f"delete one topic ({per_topic} notes):     {rate(per_topic, deleted)}")
    print(f"retention sweep (every note expired):  {rate(notes, sweeping)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--offloaded-every", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(run(args.notes, args.offloaded_every))


if __name__ == "__main__":
    main()
