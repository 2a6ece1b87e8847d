"""Export and import through the real CLI: a workspace moved from one board to another reads
the same over MCP (versions, digests, bodies byte for byte, tables, offloaded content, links
and their warnings), into a running embedded `serve` as into the Redis of BB_REDIS_URL."""

from __future__ import annotations

import functools
import json
import os
import pty
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from app_support import InProcessGateway
from lifecycle_support import cli_env, on_redis, run_cli, tool
from serve_support import kill_leftovers, start_serve, stop
from support import TEST_JWT_SECRET, agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import Board, EmbeddedRedis, UpdateState

# A tool call that insists on success: (token, tool name, arguments) -> the structured result.
Ask = Callable[..., Awaitable[dict[str, Any]]]

# Over the offload threshold, with characters outside ASCII and a line ending of each kind.
OFFLOADED = ("unicodé ✓ line\r\n" * 900) + "tail without newline"
PATHS = ("plan", "big", "grid", "log", "old", "new", "dispute")


@pytest.fixture(autouse=True)
def _no_leftover_serve() -> Iterator[None]:
    yield
    kill_leftovers()


async def seed(gateway: InProcessGateway, token: str, ws: str) -> list[str]:
    def u(path: str) -> str:
        return f"bb://{ws}/notes/{path}"

    async def write(**arguments: Any) -> None:
        await gateway.ok(token, "update_state", **arguments)

    await write(
        uri=u("plan"), digest="The plan", body="step 1\n\tstep 2  ",
        confidence=0.75, expect_version=0,
    )  # fmt: skip
    await write(uri=u("big"), digest="big one", body=OFFLOADED, expect_version=0)
    await write(
        uri=u("grid"), digest="a table", columns=["k", "v"],
        rows=[["a", "1"], ["b\\tc", "2"]], expect_version=0,
    )  # fmt: skip
    await write(uri=u("log"), digest="log", body="first", expect_version=0)
    await write(uri=u("log"), digest="log", append=" second")
    await write(uri=u("log"), digest="log v3", append=" third")
    await write(uri=u("old"), digest="old finding", body="o", expect_version=0)
    await write(
        uri=u("new"), digest="new finding", body="n",
        sources=[u("plan"), u("grid")], expect_version=0,
    )  # fmt: skip
    await write(uri=u("dispute"), digest="disputes", body="d", expect_version=0)
    await gateway.ok(token, "link_state", src=u("new"), rel="supersedes", dst=[u("old")])
    await gateway.ok(token, "link_state", src=u("dispute"), rel="contradicts", dst=[u("new")])
    await gateway.ok(token, "link_state", src=u("plan"), rel="part_of", dst=[u("grid"), u("big")])
    return [u(p) for p in PATHS]


async def read_all(ask: Ask, token: str, uris: list[str]) -> list[dict[str, Any]]:
    """Every note in full and every field of it, then the read's warnings."""
    full = await ask(token, "get_state", uris=uris, mode="full", budget_tokens=100_000)
    assert not full["truncated"], full
    fields = await ask(
        token, "get_state", uris=uris, mode="fields", budget_tokens=100_000,
        fields=["uri", "digest", "version", "kind", "author", "created", "updated", "size",
                "confidence", "sources", "columns", "rows", "origin", "est_tokens"],
    )  # fmt: skip
    # All but ``seq``: a position in the board's change feed, which the import gives anew.
    items = [
        {k: v for k, v in {**a, **b}.items() if k != "seq"}
        for a, b in zip(full["items"], fields["items"], strict=True)
    ]
    return [*items, {"warnings": full.get("warnings", [])}]


def moved(items: list[dict[str, Any]], source: str, target: str) -> list[dict[str, Any]]:
    """``items`` as they read in ``target``: every address moved, nothing else changed."""
    text = json.dumps(items).replace(f"bb://{source}/", f"bb://{target}/")
    return list(json.loads(text))


def export(env: dict[str, str], ws: str, out: Path) -> list[dict[str, Any]]:
    result = run_cli("export", "--workspace", ws, "--out", str(out), env=env)
    assert result.returncode == 0, result.stderr
    assert "exported 7 notes (2 past versions kept with them) and 4 links" in result.stderr
    assert "\r" not in result.stderr  # no progress bar when stderr is not a terminal
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


async def test_a_workspace_moves_from_a_redis_url_into_a_running_embedded_serve(
    app_gateway: InProcessGateway,
    redis_url: str,
    issuer: TokenIssuer,
    workspace: str,
    tmp_path: Path,
) -> None:
    token = agent_token(issuer, workspace)
    uris = await seed(app_gateway, token, workspace)
    before = await read_all(app_gateway.ok, token, uris)
    # superseded, and the contradiction said once (both its ends are read): from its source
    assert len(before[-1]["warnings"]) == 2, before[-1]
    dump = tmp_path / "board.jsonl"
    lines = export(on_redis(tmp_path, redis_url), workspace, dump)
    assert lines[0]["format"] == "blackboard-mcp-export"
    assert lines[0]["version"] == 2
    assert lines[0]["notes"] == 7
    big = next(line for line in lines[1:] if line["uri"].endswith("/big"))
    assert big["content"] == OFFLOADED and big["offloaded"] is True
    log = next(line for line in lines[1:] if line["uri"].endswith("/log"))
    assert log["version"] == 3 and log["content"] == "first second third"
    # Its kept past versions come just before it, oldest first (export format 2).
    at = lines.index(log)
    assert [(line["uri"], line["content"]) for line in lines[at - 2 : at]] == [
        (log["uri"] + "@1", "first"),
        (log["uri"] + "@2", "first second"),
    ]
    assert lines[at - 1]["current_version"] == 3

    serve = start_serve(tmp_path / "fresh")
    try:
        env = cli_env(tmp_path, BB_DATA_DIR=str(serve.data_dir), BB_JWT_SECRET=TEST_JWT_SECRET)
        result = run_cli("import", str(dump), env=env)
        assert result.returncode == 0, result.stderr
        assert "imported 7 notes" in result.stdout
        assert "4 links added" in result.stdout
        assert "2 past versions kept with the notes written" in result.stdout
        served = functools.partial(tool, serve.mcp_url)
        after = await read_all(served, token, uris)
        assert after == before
        history = [f"{log['uri']}@{v}" for v in (1, 2)]
        assert await read_all(served, token, history) == await read_all(
            app_gateway.ok, token, history
        )
        found = await tool(serve.mcp_url, token, "search_keys", q="finding")
        assert {i["uri"] for i in found["items"]} == {uris[4], uris[5]}
    finally:
        stop(serve, signal.SIGTERM)


async def test_an_import_into_a_new_workspace_keeps_what_is_there_unless_replace(
    app_gateway: InProcessGateway,
    redis_url: str,
    issuer: TokenIssuer,
    workspace: str,
    tmp_path: Path,
) -> None:
    token = agent_token(issuer, workspace)
    uris = await seed(app_gateway, token, workspace)
    before = await read_all(app_gateway.ok, token, uris)
    env = on_redis(tmp_path, redis_url)
    dump = tmp_path / "board.jsonl"
    export(env, workspace, dump)

    target = workspace + "-copy"
    copy_token = agent_token(issuer, target)
    result = run_cli("import", str(dump), "--workspace", target, env=env)
    assert result.returncode == 0, result.stderr
    copied = moved(before, workspace, target)
    assert await read_all(app_gateway.ok, copy_token, moved(uris, workspace, target)) == copied
    # A note changed in the copy is kept by a second import, and overwritten with --replace.
    plan = f"bb://{target}/notes/plan"
    await app_gateway.ok(copy_token, "update_state", uri=plan, digest="changed", body="x")
    again = run_cli("import", str(dump), "--workspace", target, env=env)
    assert again.returncode == 0, again.stderr
    # The six unchanged notes are this file's (an earlier run's: their links are completed);
    # the changed one is someone else's now, and kept.
    assert "imported 0 notes" in again.stdout and "1 skipped" in again.stdout
    assert "6 already there with the same version and digest" in again.stdout
    # Every link of the file is told of: added, skipped for a missing end, or left with the
    # note it belongs to, which was skipped.
    records = [json.loads(line) for line in dump.read_text().splitlines()[1:]]
    in_file = sum(len(record["links"]) for record in records)
    counts = re.search(
        r"(\d+) links added, (\d+) skipped .*?, (\d+) of skipped notes",
        again.stdout,
    )
    assert counts is not None, again.stdout
    assert sum(int(n) for n in counts.groups()) == in_file
    of_plan = next(len(r["links"]) for r in records if r["uri"].endswith("/notes/plan"))
    assert int(counts.group(3)) == of_plan
    changed = await app_gateway.ok(copy_token, "get_state", uris=[plan])
    assert changed["items"][0]["digest"] == "changed"
    replaced = run_cli("import", str(dump), "--workspace", target, "--replace", env=env)
    assert replaced.returncode == 0, replaced.stderr
    assert "imported 7 notes" in replaced.stdout and "7 replaced" in replaced.stdout
    assert await read_all(app_gateway.ok, copy_token, moved(uris, workspace, target)) == copied


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty"),
        ('{"format": "something-else"}\n', "not a blackboard-mcp-export header"),
        ('{"format": "blackboard-mcp-export", "version": 99, "workspace": "w"}\n', "version 99"),
        ('{"format": "blackboard-mcp-export", "version": 1, "workspace": "w"}\n{oops\n', "line 2"),
        (
            '{"format": "blackboard-mcp-export", "version": 1, "workspace": "w"}\n'
            '{"uri": "bb://other/t/a"}\n',
            "not in workspace w",
        ),
    ],
    ids=["empty", "not-an-export", "future-version", "bad-json", "wrong-workspace"],
)
def test_a_bad_export_file_is_refused_whole_with_the_line_that_is_wrong(
    redis_server: EmbeddedRedis, tmp_path: Path, content: str, message: str
) -> None:
    dump = tmp_path / "bad.jsonl"
    dump.write_text(content)
    result = run_cli("import", str(dump), env=on_redis(tmp_path, redis_server.url))
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


async def test_export_shows_a_progress_bar_on_a_terminal_only(
    redis_server: EmbeddedRedis, tmp_path: Path, workspace: str
) -> None:
    board = Board.from_url(redis_server.url)
    try:
        for i in range(3):
            await board.update_state(
                UpdateState.parse({"uri": f"bb://{workspace}/t/n{i}", "digest": "d", "body": ""}),
                author="a",
            )
    finally:
        await board.close()
    leader, follower = pty.openpty()
    try:
        process = subprocess.run(
            [sys.executable, "-m", "blackboard_mcp.cli", "export", "--workspace", workspace,
             "--out", str(tmp_path / "out.jsonl")],
            env=on_redis(tmp_path, redis_server.url),
            stderr=follower,
            stdout=subprocess.DEVNULL,
            timeout=60,
        )  # fmt: skip
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other end is closed: all of it was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert process.returncode == 0, shown
    assert b"\rexporting [" in shown and b"] 3/3" in shown, shown


async def test_an_export_is_private_to_its_owner_and_never_follows_a_planted_file(
    app_gateway: InProcessGateway,
    redis_url: str,
    issuer: TokenIssuer,
    workspace: str,
    tmp_path: Path,
) -> None:
    token = agent_token(issuer, workspace)
    await seed(app_gateway, token, workspace)
    env = on_redis(tmp_path, redis_url)
    out = tmp_path / "backup.jsonl"
    # What another local user could plant where the old export wrote its partial file: a
    # link to a file of theirs (to have it overwritten) and an open file (to read along).
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    (tmp_path / "backup.jsonl.partial").symlink_to(victim)
    export(env, workspace, out)
    assert victim.read_text() == "someone else's file\n"
    assert out.stat().st_mode & 0o777 == 0o600
    assert not out.is_symlink()
    leftovers = sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name)
    assert leftovers == ["backup.jsonl.partial"]  # only the planted link, untouched
