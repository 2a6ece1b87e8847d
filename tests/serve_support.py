"""`blackboard-mcp serve` as an operator runs it: the embedded Redis, real processes and signals."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
from support import TEST_JWT_SECRET, child_process

from blackboard_mcp.store import free_port

HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


@dataclass
class Serve:
    """One `serve` process on its own data dir, with no BB_REDIS_URL: it runs its own Redis."""

    data_dir: Path
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp/"

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def redis_pids(self) -> list[int]:
        """The redis-server processes this serve started (its direct children)."""
        return children(self.process.pid, "redis-server")

    def worker_pids(self) -> list[int]:
        """uvicorn's worker processes, with --workers > 1 (not its resource tracker)."""
        return [
            pid
            for pid in children(self.process.pid, "python")
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]


# Every serve a test launched, so that a failing test leaves none running (kill_leftovers).
LAUNCHED: list[Serve] = []


def kill_leftovers() -> None:
    """SIGKILL whatever serve is still running; its Redis and workers follow it."""
    while LAUNCHED:
        serve = LAUNCHED.pop()
        if serve.process.poll() is None:
            serve.process.kill()
            serve.process.wait()


def serve_env(data_dir: Path, *, jwt: bool = True, **extra: str) -> dict[str, str]:
    # Nothing of the test process's own BB_* settings leaks in: an operator's shell has none.
    env = {k: v for k, v in os.environ.items() if not k.startswith("BB_")}
    env.update({"BB_DATA_DIR": str(data_dir), "BB_LOG_LEVEL": "INFO", **extra})
    if jwt:
        env["BB_JWT_SECRET"] = TEST_JWT_SECRET
    return env


def launch_serve(
    data_dir: Path, *, port: int | None = None, jwt: bool = True, workers: int = 1, **extra: str
) -> Serve:
    """Start `serve` without waiting for it."""
    port = port or free_port()
    log_path = data_dir.parent / f"{data_dir.name}-serve-{port}-{time.monotonic_ns()}.log"
    args = ["serve", "--port", str(port), "--workers", str(workers)]
    with log_path.open("wb") as log_file:
        process = child_process(
            [sys.executable, "-m", "blackboard_mcp.cli", *args],
            env=serve_env(data_dir, jwt=jwt, **extra),
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    LAUNCHED.append(Serve(data_dir, port, process, log_path))
    return LAUNCHED[-1]


def wait_ready(serve: Serve, timeout: float = 30.0) -> Serve:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if serve.process.poll() is not None:
            raise RuntimeError(f"serve exited {serve.process.returncode}: {serve.output()}")
        try:
            if httpx.get(serve.url + "/readyz", timeout=1.0).status_code == 200:
                return serve
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    serve.process.kill()
    raise RuntimeError(f"serve did not become ready: {serve.output()}")


def start_serve(data_dir: Path, **kwargs: Any) -> Serve:
    return wait_ready(launch_serve(data_dir, **kwargs))


def stop(serve: Serve, sig: int, timeout: float = 20.0) -> int:
    serve.process.send_signal(sig)
    return serve.process.wait(timeout=timeout)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name sits in parentheses and may hold spaces: split after its end.
    return text[text.rindex(")") + 2 :].split()


def alive(pid: int) -> bool:
    """True for a running process; a zombie (dead, not yet reaped) counts as gone."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def children(parent: int, executable: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None or fields[0] == "Z" or int(fields[1]) != parent:
            continue
        try:
            exe = os.readlink(entry / "exe")
        except OSError:
            continue
        if os.path.basename(exe).startswith(executable):
            pids.append(int(entry.name))
    return pids


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def tool_request(name: str, arguments: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )


async def create_note(http: httpx.AsyncClient, mcp_url: str, uri: str) -> str:
    """Create ``uri`` at version 1; "ok", a tool error code, or "transport"."""
    request = tool_request(
        "update_state", {"uri": uri, "digest": f"note {uri}", "body": uri, "expect_version": 0}
    )
    try:
        response = await http.post(mcp_url, content=request)
    except httpx.TransportError:
        return "transport"
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    body = result["structuredContent"]
    if result.get("isError"):
        return str(body["error"]["code"])
    assert body["version"] == 1, body
    return "ok"


async def missing_notes(http: httpx.AsyncClient, mcp_url: str, uris: list[str]) -> list[str]:
    """Of ``uris``, those not on the board at version 1 with the digest create_note wrote."""
    missing: list[str] = []
    for start in range(0, len(uris), 100):
        batch = uris[start : start + 100]
        request = tool_request("get_state", {"uris": batch, "budget_tokens": 100_000})
        response = await http.post(mcp_url, content=request)
        result = response.json()["result"]
        assert not result.get("isError"), result
        items = {item["uri"]: item for item in result["structuredContent"]["items"]}
        missing += [
            uri
            for uri in batch
            if items[uri].get("version") != 1 or items[uri].get("digest") != f"note {uri}"
        ]
    return missing


def http_client(token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=10)
