"""An import reads its file a line at a time: memory does not grow with the file, a line over
BB_IMPORT_MAX_LINE_BYTES is refused before anything is written, and standard input (which
cannot be read twice) imports like a file."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from lifecycle_support import on_redis, run_cli
from support import child_process

from blackboard_mcp.store import (
    Board,
    EmbeddedRedis,
    ExportFile,
    GetState,
    UpdateState,
    board_client,
)
from blackboard_mcp.store.connection import _key_names as keys
from blackboard_mcp.store.lifecycle._transfer import _BATCH, Imported, check_record

# Runs the real CLI in a process of its own and reports the peak of what Python allocated
# during the command (after the imports, which are the same for every file).
_TRACED = """
import sys, tracemalloc
from blackboard_mcp.cli import main
tracemalloc.start()
try:
    code = main(sys.argv[1:])
finally:
    print("peak", tracemalloc.get_traced_memory()[1], file=sys.stderr)
sys.exit(code)
"""


def record(ws: str, i: int, body: str) -> dict[str, Any]:
    previous = [{"rel": "cites", "to": f"bb://{ws}/t/n{i - 1}"}] if i else []
    return {
        "uri": f"bb://{ws}/t/n{i}", "kind": "text", "version": 1, "digest": f"note {i}",
        "content": body, "offloaded": False, "columns": None, "sources": [],
        "confidence": None, "author": "a", "origin": "", "size": len(body), "est_tokens": 1,
        "digest_tokens": 1, "body_tokens": 1, "nrows": 0, "created": 1, "updated": 1,
        "links": previous,
    }  # fmt: skip


def export_file(path: Path, ws: str, notes: int, body: str = "x" * 4000) -> Path:
    with path.open("w", encoding="utf-8") as out:
        header = {"format": "blackboard-mcp-export", "version": 1, "workspace": ws}
        out.write(json.dumps(header) + "\n")
        for i in range(notes):
            out.write(json.dumps(record(ws, i, f"{i} {body}")) + "\n")
    return path


async def count(url: str, ws: str) -> int:
    board = Board.from_url(url)
    try:
        return await board.count_notes(ws)
    finally:
        await board.close()


def traced_import(env: dict[str, str], dump: Path, target: str) -> int:
    result = subprocess.run(
        [sys.executable, "-c", _TRACED, "import", str(dump), "--workspace", target],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return int(result.stderr.split("peak ")[1].split()[0])


async def test_an_import_holds_no_more_memory_for_a_file_four_times_larger(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str
) -> None:
    env = on_redis(tmp_path, redis_server.url)
    small = export_file(tmp_path / "small.jsonl", "src", 400)
    large = export_file(tmp_path / "large.jsonl", "src", 1600)
    small_peak = traced_import(env, small, workspace + "-s")
    large_peak = traced_import(env, large, workspace + "-l")
    assert await count(redis_server.url, workspace + "-s") == 400
    assert await count(redis_server.url, workspace + "-l") == 1600
    # Holding the records costs about 8 KB a note (the content, as bytes and as text): some
    # 10 MB more for the large file. Read a line at a time, both cost the same (the peak also
    # holds what every command loads, such as the token encoder, the same for both).
    assert large_peak - small_peak < 1024 * 1024, (small_peak, large_peak)


def test_a_line_over_the_limit_is_refused_and_nothing_is_imported(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str
) -> None:
    dump = export_file(tmp_path / "dump.jsonl", "src", 3)
    with dump.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record("src", 3, "y" * 20_000)) + "\n")
    env = on_redis(tmp_path, redis_server.url) | {"BB_IMPORT_MAX_LINE_BYTES": "16384"}
    result = run_cli("import", str(dump), "--workspace", workspace, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "line 5 is longer than 16384 bytes" in result.stderr
    assert "BB_IMPORT_MAX_LINE_BYTES" in result.stderr
    assert "Traceback" not in result.stderr


async def test_an_import_from_standard_input_writes_every_note_and_link(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str
) -> None:
    dump = export_file(tmp_path / "dump.jsonl", "src", 250, body="z")
    env = on_redis(tmp_path, redis_server.url)
    result = run_cli("import", "-", "--workspace", workspace, env=env, stdin=dump.read_text())
    assert result.returncode == 0, result.stderr
    assert "imported 250 notes" in result.stdout and "249 links added" in result.stdout
    assert await count(redis_server.url, workspace) == 250


async def test_a_file_changed_during_the_import_does_not_tear_it(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str
) -> None:
    dump = export_file(tmp_path / "dump.jsonl", "src", 20, body="z")
    original = dump.read_bytes()
    board = Board.from_url(redis_server.url)
    try:
        with ExportFile.open(str(dump), max_line_bytes=1 << 20) as export:
            export.check(workspace)
            passes = 0

            def records() -> Iterator[Imported]:
                nonlocal passes
                passes += 1
                if passes == 2:
                    # Between the notes pass and the links pass, someone cuts the file short.
                    dump.write_bytes(original[: len(original) // 2])
                return export.records()

            report = await board.import_notes(
                records, workspace=workspace, replace=False, author="op"
            )
        assert passes == 2
        # The file as it was when the import began: every note, and every link.
        assert (report.imported, report.skipped, report.links) == (20, 0, 19)
        assert await board.count_notes(workspace) == 20
    finally:
        await board.close()


async def test_an_import_longer_than_one_operations_deadline_completes(
    redis_url: str,
) -> None:
    # The deadline bounds each of the import's round trips, not the whole import: here the
    # file is read slowly (a slow disk, a pipe), so the import as a whole outlasts several
    # deadlines while every round trip to Redis stays well inside one.
    board = Board(client=board_client(redis_url, timeout_seconds=1.0))
    ws = "slow-import"
    notes = 3 * _BATCH

    def records() -> Iterator[Imported]:
        for i in range(notes):
            if i % _BATCH == _BATCH - 1:
                time.sleep(0.6)  # the source's pause between batches, not a wait for Redis
            yield check_record(record(ws, i, f"body {i}"), source=ws, target=ws)

    try:
        report = await board.import_notes(records, workspace=ws, replace=False, author="ops")
        assert (report.imported, report.skipped) == (notes, 0)
        assert report.links == notes - 1
        assert await board.count_notes(ws) == notes
    finally:
        await board.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_an_interrupted_import_says_how_far_it_got_and_running_it_again_completes_it(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str, sig: signal.Signals
) -> None:
    notes = 20_000  # some seconds of writing: the signal lands part-way
    dump = export_file(tmp_path / "dump.jsonl", "src", notes, body="z")
    env = on_redis(tmp_path, redis_server.url)
    command = [sys.executable, "-m", "blackboard_mcp.cli", "import", str(dump)]
    first = child_process(
        [*command, "--workspace", workspace],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watcher = redis.Redis.from_url(redis_server.url)
    try:
        started = time.monotonic()
        while not next(watcher.scan_iter(match=f"bbn:{{{workspace}}}:*", count=100), None):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() - started < 120, "the import wrote nothing"
            time.sleep(0.02)
        first.send_signal(sig)
        _, errors = first.communicate(timeout=60)
    finally:
        watcher.close()
    assert first.returncode == 130, errors
    lines = errors.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in errors, errors
    assert re.search(
        r"the import was interrupted (after \d+ of 20000 records|with every note)", lines[0]
    )
    assert "run the same command again to finish it" in lines[1]
    written = await count(redis_server.url, workspace)
    assert 0 < written < notes or "with every note" in lines[0]

    again = run_cli("import", str(dump), "--workspace", workspace, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert await count(redis_server.url, workspace) == notes
    # The notes of the first run are recognised, not counted as someone else's: every link
    # is there, to the last.
    assert "written by an earlier run of this import" in again.stdout
    assert f"{notes - 1} links added" in again.stdout, again.stdout
    board = Board.from_url(redis_server.url)
    try:
        last = await board.get_state(
            GetState.parse({"uris": [f"bb://{workspace}/t/n{notes - 1}"], "mode": "full"})
        )
        first_note = await board.get_state(
            GetState.parse({"uris": [f"bb://{workspace}/t/n1"], "mode": "full"})
        )
    finally:
        await board.close()
    assert last["items"][0]["links"] == [{"rel": "cites", "to": f"bb://{workspace}/t/n{notes - 2}"}]
    assert first_note["items"][0]["links"][0] == {"rel": "cites", "to": f"bb://{workspace}/t/n0"}


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("content", "x" * (64 * 1024 + 1), "BB_MAX_BODY_BYTES"),
        ("digest", "d" * 2_000_000, "the digest has 2000000 characters"),
        ("digest", "", "a digest is required"),
        ("author", "mallory\nINFO forged log line", "author must be"),
        ("version", 10**18, "version must be from 0 to 9007199254740991"),
        ("updated", -5, "updated must be from 0"),
    ],
)
def test_an_import_holds_each_record_to_the_write_paths_limits(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str, field: str, value: Any, said: str
) -> None:
    bad = record("src", 1, "fine") | {field: value}
    dump = export_file(tmp_path / "dump.jsonl", "src", 1)
    with dump.open("a", encoding="utf-8") as out:
        out.write(json.dumps(bad) + "\n")
    env = on_redis(tmp_path, redis_server.url) | {"BB_MAX_BODY_BYTES": str(64 * 1024)}
    result = run_cli("import", str(dump), "--workspace", workspace, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert said in result.stderr and "line 3" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    # Nothing written: no key of the workspace, and the board does not know it. (Not the
    # whole database's size: the session's gateways write their own keys meanwhile.)
    with redis.Redis.from_url(redis_server.url) as client:
        assert not list(client.scan_iter(match=f"*{{{workspace}}}*", count=1000))
        assert not client.sismember(keys.workspaces(), workspace)


async def test_an_imports_size_and_token_counts_are_the_contents_not_the_files(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str
) -> None:
    body = "a body whose counts the file lies about " * 50
    lying = record("src", 0, body) | {"size": 1, "est_tokens": 1, "body_tokens": 0}
    dump = tmp_path / "dump.jsonl"
    header = {"format": "blackboard-mcp-export", "version": 1, "workspace": "src"}
    dump.write_text(json.dumps(header) + "\n" + json.dumps(lying) + "\n")
    result = run_cli(
        "import", str(dump), "--workspace", workspace, env=on_redis(tmp_path, redis_server.url)
    )
    assert result.returncode == 0, result.stderr
    board = Board.from_url(redis_server.url)
    try:
        await board.update_state(
            UpdateState.parse(
                {"uri": f"bb://{workspace}/t/same", "digest": "note 0", "body": body}
            ),
            author="a",
        )
        got = await board.get_state(
            GetState.parse(
                {
                    "uris": [f"bb://{workspace}/t/n0", f"bb://{workspace}/t/same"],
                    "mode": "fields",
                    "fields": ["size", "est_tokens"],
                }
            )
        )
    finally:
        await board.close()
    imported, written = got["items"]
    assert imported["size"] == len(body.encode()) == written["size"]
    assert imported["est_tokens"] == written["est_tokens"] > 100
