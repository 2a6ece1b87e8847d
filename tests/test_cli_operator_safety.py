"""The operator's CLI cannot destroy by accident, and says plainly what it did.

Nothing that removes notes does so without ``--yes``: it previews how many would go and the
first few addresses, and exits 1 (the one exit code of every preview). A typo'd topic is
said as such. A closed pipe ends a command quietly. The board that cannot be found is the
same exit code (2) for every command. Real CLI processes on the real Redis.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from lifecycle_support import cli_env, run_cli
from support import TEST_JWT_SECRET

from blackboard_mcp.store import Board, EmbeddedRedis, UpdateState


def env_for(home: Path, redis_server: EmbeddedRedis) -> dict[str, str]:
    return cli_env(home, BB_REDIS_URL=redis_server.url, BB_JWT_SECRET=TEST_JWT_SECRET)


def write_notes(url: str, workspace: str, topic: str, count: int) -> None:
    async def run() -> None:
        board = Board.from_url(url)
        try:
            for i in range(count):
                await board.update_state(
                    UpdateState.parse(
                        {"uri": f"bb://{workspace}/{topic}/n{i}", "digest": "d", "body": "b"}
                    ),
                    author="op",
                )
        finally:
            await board.close()

    asyncio.run(run())


def count_notes(url: str, workspace: str) -> int:
    async def run() -> int:
        board = Board.from_url(url)
        try:
            return await board.count_notes(workspace)
        finally:
            await board.close()

    return asyncio.run(run())


def piped(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``command | head -1`` in a shell; stdout is head's, the exit status the command's."""
    cli = f"{sys.executable} -m blackboard_mcp.cli"
    return subprocess.run(
        ["bash", "-c", f"{cli} {command} | head -1; exit ${{PIPESTATUS[0]}}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_closed_pipe_ends_a_command_quietly(
    tmp_path: Path, redis_server: EmbeddedRedis, workspace: str
) -> None:
    env = env_for(tmp_path, redis_server)
    write_notes(redis_server.url, workspace, "t", 300)
    # An audit record to tail.
    run_cli("retention", "set", "--workspace", workspace, "--max-age", "30d", env=env)
    for command in (f"export --workspace {workspace}", f"audit tail --workspace {workspace}"):
        result = piped(command, env)
        assert result.stderr == "", (command, result.stderr)
        assert result.stdout.count("\n") == 1, result.stdout
        assert result.returncode in (0, 141), (command, result.returncode)


def test_delete_of_an_address_takes_the_workspace_from_it(
    tmp_path: Path, redis_server: EmbeddedRedis, workspace: str
) -> None:
    env = env_for(tmp_path, redis_server)
    write_notes(redis_server.url, workspace, "t", 2)
    preview = run_cli("delete", "--uri", f"bb://{workspace}/t/n0", env=env)
    assert preview.returncode == 1, preview.stderr
    assert f"bb://{workspace}/t/n0" in preview.stdout
    done = run_cli("delete", "--uri", f"bb://{workspace}/t/n0", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert count_notes(redis_server.url, workspace) == 1
    missing = run_cli("delete", "--uri", f"bb://{workspace}/t/nope", "--yes", env=env)
    assert missing.returncode == 1
    assert "list_keys" not in missing.stderr and "search_keys" not in missing.stderr
    assert "blackboard-mcp" in missing.stderr


def test_a_mistyped_topic_is_said_to_be_empty_not_deleted(
    tmp_path: Path, redis_server: EmbeddedRedis, workspace: str
) -> None:
    env = env_for(tmp_path, redis_server)
    write_notes(redis_server.url, workspace, "research", 2)
    typo = run_cli("delete", "--workspace", workspace, "--topic", "resarch", "--yes", env=env)
    assert typo.returncode == 1, typo.stdout
    assert "no notes in topic 'resarch'" in typo.stderr
    assert "deleted 0" not in typo.stdout


def test_every_preview_exits_1_and_changes_nothing(
    tmp_path: Path, redis_server: EmbeddedRedis, workspace: str
) -> None:
    env = env_for(tmp_path, redis_server)
    write_notes(redis_server.url, workspace, "research", 3)
    preview = run_cli("delete", "--workspace", workspace, "--topic", "research", env=env)
    assert preview.returncode == 1
    assert "would delete 3 notes" in preview.stdout
    assert count_notes(redis_server.url, workspace) == 3
    # Keeping notes 90 seconds would expire all three at the next sweep: previewed, not set.
    aged = run_cli(
        "retention", "set", "--workspace", workspace, "--topic", "research", "--max-age", "1s",
        env=env,
    )  # fmt: skip
    assert aged.returncode == 1, aged.stdout + aged.stderr
    assert "would delete 3 notes" in aged.stdout
    assert f"bb://{workspace}/research/n0" in aged.stdout
    shown = run_cli("retention", "show", "--workspace", workspace, env=env)
    assert "topic research" not in shown.stdout
    applied = run_cli(
        "retention", "set", "--workspace", workspace, "--topic", "research", "--max-age", "1s",
        "--yes", env=env,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    # A setting that removes nothing needs no --yes.
    kept = run_cli(
        "retention", "set", "--workspace", workspace, "--topic", "research", "--max-age", "30d",
        env=env,
    )  # fmt: skip
    assert kept.returncode == 0, kept.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("export", "--workspace", "w"),
        ("audit", "tail", "--workspace", "w"),
        ("token", "list", "--workspace", "w"),
        ("import", "FILE"),
    ],
)
def test_a_board_that_cannot_be_found_is_exit_2_for_every_command(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text(
        '{"format": "blackboard-mcp-export", "version": 2, "workspace": "w"}\n'
        '{"uri": "bb://w/t/a", "kind": "text", "version": 1, "digest": "d", "content": "b", '
        '"offloaded": false, "columns": null, "sources": [], "confidence": null, '
        '"author": "a", "origin": "", "size": 1, "est_tokens": 1, "digest_tokens": 1, '
        '"body_tokens": 1, "nrows": 0, "created": 1, "updated": 1, "links": []}\n'
    )
    args = [str(dump) if part == "FILE" else part for part in command]
    result = run_cli(*args, env=cli_env(tmp_path, BB_JWT_SECRET=TEST_JWT_SECRET))
    assert result.returncode == 2, result.stderr
    assert "stopped after" not in result.stderr


def test_lowering_the_history_bound_previews_the_versions_it_would_drop(
    tmp_path: Path, redis_server: EmbeddedRedis, workspace: str
) -> None:
    env = env_for(tmp_path, redis_server)
    for _ in range(5):
        write_notes(redis_server.url, workspace, "plans", 1)  # versions 1..5 of plans/n0
    history = ("retention", "history", "--workspace", workspace, "--max-age", "forever")
    preview = run_cli(*history, "--versions", "1", env=env)
    assert preview.returncode == 1, preview.stdout + preview.stderr
    assert "would drop 3 past versions" in preview.stdout
    assert f"bb://{workspace}/plans/n0@1" in preview.stdout
    shown = run_cli("retention", "show", "--workspace", workspace, env=env)
    assert "history" not in shown.stdout
    assert run_cli(*history, "--versions", "1", "--yes", env=env).returncode == 0
    # Raising it again drops nothing: no preview.
    assert run_cli(*history, "--versions", "10", env=env).returncode == 0
