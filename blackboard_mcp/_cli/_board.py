"""The board as an operator's command reaches it: its Redis, its audit stream, and who is asking."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from blackboard_mcp import _composition
from blackboard_mcp.auth import AuditRecord
from blackboard_mcp.settings import Settings
from blackboard_mcp.store import Board, RedisAuditLog

from ._errors import CliError
from ._redis import redis_failures, redis_url

T = TypeVar("T")


def operator() -> str:
    """Who runs this command, as the audit stream names them: ``cli:<login name>``."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # a container user with no passwd entry
        name = "unknown"
    return f"cli:{name}"


@contextlib.asynccontextmanager
async def open_board(settings: Settings) -> AsyncIterator[Board]:
    board = _composition.open_board(settings, url=redis_url(settings))
    try:
        yield board
    finally:
        await board.close()


def on_board(settings: Settings, work: Callable[[Board], Awaitable[T]]) -> T:
    """Run ``work`` against the configured board; Redis failures become one CLI error."""

    async def run() -> T:
        async with open_board(settings) as board:
            return await work(board)

    with redis_failures(redis_url(settings)):
        return asyncio.run(run())


async def audit(
    board: Board, settings: Settings, *, workspace: str, tool: str, target: str, outcome: str
) -> None:
    """One audit record of an operator's command, beside the gateway's own."""
    log = RedisAuditLog(redis=board.redis, maxlen=settings.audit_maxlen)
    await log.record(
        AuditRecord(
            at=time.time(),
            workspace=workspace,
            subject=operator(),
            tool=tool,
            addresses=(target,),
            outcome=outcome,
            duration_ms=0.0,
            request_id="cli",
        )
    )


class NoSuchWorkspace(CliError):
    """The workspace named was never written to on this board (or was deleted whole)."""


async def require_workspace(board: Board, workspace: str) -> None:
    """Refuse a workspace this board has never seen: a typo must not read as an empty one."""
    if not await board.workspace_exists(workspace):
        raise NoSuchWorkspace(
            f"no workspace {workspace!r} on this board: nothing was written to it, or it was "
            "deleted whole",
            hint="check the name (a workspace exists once a note is written to it)",
        )
