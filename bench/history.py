"""Note history: what keeping past versions costs in Redis memory and in write throughput.

One embedded Redis without persistence, emptied between parts, all in one run:

- **memory, many notes**: ``--notes`` notes, each written ``--writes`` times whole (a digest
  and a body of ``--body-bytes`` random words that change at every write, each write a
  compare-and-swap with the version just written), first with history off
  (``BB_HISTORY_VERSIONS=0``) and then with the default bound (50 past versions): Redis's
  used_memory growth per note, and against the payload that is kept (the current version's
  bytes, or every version's).
- **memory, one log**: a log built by ``--appends`` appends of a 100-byte line (about 1 MiB
  at 10,000), keeping as many versions as a note may (``history_versions`` as large as the
  appends, at most MAX_HISTORY_VERSIONS, 1,000): growth against the log's size, and the kept
  versions.
- **throughput**: ``--writers`` tasks, each on notes of its own, read a note and write it back
  changed with the version read (compare-and-swap), as agents do, for ``--seconds``;
  history off and on in alternating rounds (``--rounds``), side by side: writes/s and the
  ratio on / off.

    python bench/history.py [--notes 10000] [--writes 10] [--body-bytes 512]
        [--appends 10000] [--writers 8] [--seconds 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from operator import itemgetter

import redis
from _harness import Figures, embedded_redis, random_text, rounds

from blackboard_mcp.store import (
    MAX_HISTORY_VERSIONS,
    Board,
    BoardLimits,
    GetState,
    UpdateState,
    board_client,
)

WORDS = [f"w{i}" for i in range(2000)]
DEFAULT_VERSIONS = BoardLimits().history_versions


def _used(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("memory")["used_memory"])
    finally:
        client.close()


def _flush(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushall()
    finally:
        client.close()


async def _many_notes(url: str, versions: int, args: argparse.Namespace) -> tuple[int, int]:
    """Write the notes; returns (used_memory growth, payload bytes kept)."""
    board = Board(client=board_client(url), limits=BoardLimits(history_versions=versions))
    await board.start()
    before = _used(url)
    rng = random.Random(7)
    kept = 0

    async def writer(first: int) -> int:
        payload = 0
        for n in range(first, args.notes, 16):
            sizes = []
            for version in range(args.writes):
                body = random_text(rng, args.body_bytes, WORDS)
                digest = f"Note {n} at its version {version + 1}."
                await board.update_state(
                    UpdateState.parse(
                        {
                            "uri": f"bb://hist/t{n % 5}/n{n}",
                            "digest": digest,
                            "body": body,
                            "expect_version": version,
                        }
                    ),
                    author="bench",
                )
                sizes.append(len(body) + len(digest))
            payload += sum(sizes[-(versions + 1) :]) if versions else sizes[-1]
        return payload

    kept = sum(await asyncio.gather(*(writer(i) for i in range(16))))
    grown = _used(url) - before
    await board.close()
    return grown, kept


async def _one_log(url: str, appends: int) -> tuple[int, int, int]:
    kept = min(appends, MAX_HISTORY_VERSIONS)
    board = Board(client=board_client(url), limits=BoardLimits(history_versions=kept))
    await board.start()
    before = _used(url)
    line = "x" * 99 + "\n"
    for _ in range(appends):
        await board.update_state(
            UpdateState.parse({"uri": "bb://hist/logs/run", "digest": "A log.", "append": line}),
            author="bench",
        )
    grown = _used(url) - before
    client = redis.Redis.from_url(url)
    try:
        kept = int(client.zcard("bbhv:{hist}:logs/run"))
    finally:
        client.close()
    await board.close()
    return grown, appends * len(line), kept


def _redis_cpu(url: str) -> float:
    client = redis.Redis.from_url(url)
    try:
        cpu = client.info("cpu")
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    finally:
        client.close()


async def _throughput(
    url: str, versions: int, args: argparse.Namespace, round_: int
) -> tuple[float, float]:
    """(writes/s, Redis CPU in microseconds per write, its read included)."""
    board = Board(client=board_client(url), limits=BoardLimits(history_versions=versions))
    await board.start()
    rng = random.Random(round_)
    stop = time.monotonic() + args.seconds
    done = 0

    async def writer(w: int) -> None:
        nonlocal done
        n = 0
        while time.monotonic() < stop:
            uri = f"bb://tp{round_}-{versions}/w{w}/n{n % 50}"
            read = await board.get_state(GetState.parse({"uris": [uri], "mode": "ref"}))
            item = read["items"][0]
            version = 0 if "error" in item else item["version"]
            await board.update_state(
                UpdateState.parse(
                    {
                        "uri": uri,
                        "digest": f"Writer {w}, round {n}.",
                        "body": random_text(rng, args.body_bytes, WORDS),
                        "expect_version": version,
                    }
                ),
                author=f"w{w}",
            )
            done += 1
            n += 1

    started = time.monotonic()
    cpu = _redis_cpu(url)
    await asyncio.gather(*(writer(w) for w in range(args.writers)))
    elapsed = time.monotonic() - started
    cpu = _redis_cpu(url) - cpu
    await board.close()
    return done / elapsed, cpu / max(done, 1) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--writes", type=int, default=10)
    parser.add_argument("--body-bytes", type=int, default=512)
    parser.add_argument("--appends", type=int, default=10_000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with embedded_redis(append_only=False) as server:
        url = server.url
        print(f"{args.notes} notes written {args.writes} times, bodies of {args.body_bytes} B:")
        for label, versions in (("history off", 0), (f"history on ({DEFAULT_VERSIONS})", 50)):
            _flush(url)
            grown, kept = asyncio.run(_many_notes(url, versions, args))
            print(
                f"  {label:<18} {grown / args.notes:8.0f} B/note  "
                f"{grown / kept:5.2f}x the payload kept ({kept / args.notes:.0f} B/note)"
            )
        _flush(url)
        grown, size, kept = asyncio.run(_one_log(url, args.appends))
        print(
            f"one log of {args.appends} appends ({size / 1024:.0f} KiB), {kept} versions kept: "
            f"{grown / 1024:.0f} KiB, {grown / size:.2f}x the log's size"
        )
        print(f"CAS writes, {args.writers} writers, {args.seconds:g} s a round:")
        measured: Figures[str, tuple[float, float]] = Figures()
        for round_no, order in rounds(args.rounds, [("off", 0), ("on", DEFAULT_VERSIONS)]):
            for history, versions in order:
                _flush(url)
                measured.add(history, asyncio.run(_throughput(url, versions, args, round_no - 1)))
            (off, cpu_off), (on, cpu_on) = measured["off"][-1], measured["on"][-1]
            print(
                f"  round {round_no}: off {off:7.0f}/s ({cpu_off:4.0f} us Redis CPU)  "
                f"on {on:7.0f}/s ({cpu_on:4.0f} us)  on/off {on / off:.3f}"
            )
        off, cpu_off, on, cpu_on = (
            measured.median(history, itemgetter(i)) for history in ("off", "on") for i in (0, 1)
        )
        print(
            f"  median: off {off:7.0f}/s ({cpu_off:4.0f} us)"
            f"  on {on:7.0f}/s ({cpu_on:4.0f} us)"
            f"  on/off {on / off:.3f}"
        )


if __name__ == "__main__":
    main()
