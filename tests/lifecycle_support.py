"""The operator's side of the data lifecycle tests: the real CLI against the test Redis."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support import TEST_JWT_SECRET, call, mcp_client


def cli_env(home: Path, **settings: str) -> dict[str, str]:
    """An operator's shell: a home of its own and only the BB_* settings given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_")}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "share"), **settings)
    return env


def run_cli(
    *args: str, env: dict[str, str], stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "blackboard_mcp.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def on_redis(home: Path, redis_url: str) -> dict[str, str]:
    return cli_env(home, BB_REDIS_URL=redis_url, BB_JWT_SECRET=TEST_JWT_SECRET)


async def write(url: str, token: str, **arguments: Any) -> dict[str, Any]:
    async with mcp_client(url, token) as client:
        err, body = await call(client, "update_state", **arguments)
    assert not err, body
    return body


async def tool(url: str, token: str, name: str, **arguments: Any) -> dict[str, Any]:
    async with mcp_client(url, token) as client:
        err, body = await call(client, name, **arguments)
    assert not err, body
    return body
