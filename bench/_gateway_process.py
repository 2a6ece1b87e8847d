"""A `blackboard-mcp serve` process for a benchmark, and tokens it accepts.

Every bench that goes through the gateway starts it the same way: on a free port, against
the bench's own Redis, with the rate limit off (a bench is one subject making thousands of
calls a minute) and a signing secret known to the bench.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
from pydantic import SecretStr

from blackboard_mcp.auth import TokenIssuer, keys_from_settings
from blackboard_mcp.settings import Settings
from blackboard_mcp.store import free_port

BENCH_SECRET = "bench-secret-" + "b" * 40


def start_gateway(
    redis_url: str,
    *,
    workers: int = 1,
    data_dir: Path | None = None,
    extra_env: dict[str, str] | None = None,
    package_root: Path | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """Start the gateway and wait until /healthz answers; returns the process and its port.

    ``package_root`` runs the ``blackboard_mcp`` package found there (another revision's,
    see ``extract_revision``) instead of the installed one. The process then starts in that
    directory: ``python -m`` puts the working directory first on ``sys.path``, ahead of
    PYTHONPATH, so a bench started from a checkout would otherwise run the checkout's code
    whatever PYTHONPATH says. Which package the process imports is checked before it starts.
    """
    port = free_port()
    env = {
        **os.environ,
        "BB_REDIS_URL": redis_url,
        "BB_JWT_SECRET": BENCH_SECRET,
        "BB_RATE_LIMIT_PER_MINUTE": "0",
        "BB_LOG_LEVEL": "WARNING",
        "BB_DATA_DIR": str(data_dir or tempfile.mkdtemp()),
        **(extra_env or {}),
    }
    if package_root is not None:
        env["PYTHONPATH"] = str(package_root)
        _check_imports_from(package_root, env)
    command = [sys.executable, "-m", "blackboard_mcp.cli", "serve", "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--workers", str(workers)],
        env=env,
        cwd=package_root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def healthy() -> bool:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200

    wait_until_answering(proc, healthy, name="the gateway", timeout=60)
    return proc, port


def wait_until_answering(
    proc: subprocess.Popen[bytes], answers: Callable[[], bool], *, name: str, timeout: float
) -> None:
    """Poll ``answers`` until it says yes; the process is killed if it never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited during start")
        try:
            if answers():
                return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{name} did not start")


def start_floor(redis_url: str) -> tuple[subprocess.Popen[bytes], int]:
    """The CAS floor server (bench/_cas_floor_server.py) on a free port, once it listens."""
    port = free_port()
    script = Path(__file__).with_name("_cas_floor_server.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port), redis_url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    wait_until_answering(proc, listening, name="the floor server", timeout=30)
    return proc, port


def _check_imports_from(package_root: Path, env: dict[str, str]) -> None:
    found = subprocess.run(
        [sys.executable, "-c", "import blackboard_mcp; print(blackboard_mcp.__file__)"],
        env=env,
        cwd=package_root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(package_root.resolve()):
        raise SystemExit(f"the gateway would import {found}, not the package in {package_root}")


def bench_issuer(secret: str = BENCH_SECRET) -> TokenIssuer:
    signing, _ = keys_from_settings(Settings(jwt_secret=SecretStr(secret)))
    assert signing is not None
    return TokenIssuer(signing_key=signing, issuer="blackboard-mcp", audience="blackboard-mcp")


def bench_token(
    *,
    workspace: str,
    subject: str = "bench",
    capabilities: Sequence[str] = ("board_read", "board_write"),
    ttl_seconds: int = 6 * 3600,
    issuer: TokenIssuer | None = None,
) -> str:
    """A token for every topic of ``workspace``."""
    return (issuer or bench_issuer()).issue(
        subject=subject,
        workspace=workspace,
        read=["*"],
        write=["*"],
        capabilities=list(capabilities),
        ttl_seconds=ttl_seconds,
    )


def post_mcp(
    http: httpx.Client, url: str, token: str, method: str, params: dict[str, Any] | None = None
) -> Any:
    """One JSON-RPC request as a 2025-06-18 client sends it; the ``result`` of its answer."""
    response = http.post(
        url,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
        },
        content=orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}),
    )
    return response.json()["result"]
