"""Helpers shared by the gateway tests: a real server process and the SDK's client."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from blackboard_mcp.store import free_port
from blackboard_mcp.store.embedded._processes import spawn

if TYPE_CHECKING:
    from blackboard_mcp.auth import TokenIssuer

TEST_JWT_SECRET = "test-secret-" + "x" * 40


def child_process(args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` for a server a test starts, which the kernel stops (SIGTERM) when
    the test run ends however it ends: a pytest killed by a timeout or by SIGKILL leaves no
    gateway, Redis or client behind holding ports.

    The child hears Ctrl-C whatever this process does with it: a suite started in the
    background of a shell ignores SIGINT, and its children would inherit that, so a test
    that stops a command with SIGINT would wait for ever.
    """
    return spawn(args, also_in_child=_hear_sigint, **kwargs)


def _hear_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class GatewayProcess:
    """A `blackboard-mcp serve` process on a free port, sharing the session's Redis."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp/"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_gateway(
    redis_url: str,
    workdir: Path,
    *,
    extra_env: dict[str, str] | None = None,
    workers: int = 1,
) -> GatewayProcess:
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "BB_REDIS_URL": redis_url,
        "BB_JWT_SECRET": TEST_JWT_SECRET,
        "BB_DATA_DIR": str(workdir / "data"),
        "BB_SOURCE_ROOT": str(workdir / "sources"),
        "BB_LOG_LEVEL": "INFO",
        **(extra_env or {}),
    }
    (workdir / "sources").mkdir(exist_ok=True)
    log_path = workdir / f"gateway-{port}.log"
    log_file = log_path.open("wb")
    process = child_process(
        [
            sys.executable,
            "-m",
            "blackboard_mcp.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    log_file.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gateway exited: {log_path.read_text()}")
        try:
            if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                return GatewayProcess(url, process, log_path)
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"gateway did not start: {log_path.read_text()}")


def stop_gateway(gateway: GatewayProcess) -> None:
    if gateway.process.poll() is None:
        gateway.process.send_signal(signal.SIGINT)
        try:
            gateway.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            gateway.process.kill()
            gateway.process.wait()


def agent_token(
    issuer: TokenIssuer,
    workspace: str,
    *,
    sub: str = "agent-1",
    read: list[str] | None = None,
    write: list[str] | None = None,
    caps: list[str] | None = None,
    ttl: int = 600,
) -> str:
    return issuer.issue(
        subject=sub,
        workspace=workspace,
        read=["*"] if read is None else read,
        write=["*"] if write is None else write,
        capabilities=["board_read", "board_write", "file_read"] if caps is None else caps,
        ttl_seconds=ttl,
    )


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str | None) -> AsyncIterator[Client]:
    """The SDK's own client over Streamable HTTP with a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30.0) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    """Call ``tool``; returns (is_error, structured body)."""
    result = await client.call_tool(tool, arguments)
    body = result.structured_content
    assert isinstance(body, dict), result
    return bool(result.is_error), body


def admin_token(issuer: TokenIssuer, workspace: str, *, sub: str = "admin", ttl: int = 600) -> str:
    """An admin of ``workspace`` as `serve` makes one: every topic, every capability."""
    return issuer.issue(
        subject=sub,
        workspace=workspace,
        read=["*"],
        write=["*"],
        capabilities=["admin", "board_read", "board_write", "file_read"],
        ttl_seconds=ttl,
    )
