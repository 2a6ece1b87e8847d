"""A `blackboard-mcp serve` process on a free port, for the tests and benchmarks whose subject
is the server itself: its workers, its signals, its logs, or another revision's package."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from blackboard_mcp.store import free_port
from blackboard_mcp.store.embedded._processes import spawn

# The signing secret a gateway started here accepts unless told another.
TEST_JWT_SECRET = "test-secret-" + "x" * 40


class GatewayDidNotStart(RuntimeError):
    """The process exited, or never answered /healthz, within its start deadline."""


def child_process(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` for a server a test or bench starts, which the kernel stops
    (SIGTERM) when this process ends however it ends: a run killed by a timeout or by SIGKILL
    leaves no gateway, Redis or client behind holding ports.

    The child hears Ctrl-C whatever this process does with it: a run started in the
    background of a shell ignores SIGINT, and its children would inherit that, so stopping
    one with SIGINT would wait for ever.
    """
    return spawn(args, also_in_child=_hear_sigint, **kwargs)


def _hear_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass(frozen=True)
class GatewayProcess:
    """A started gateway: its base URL, its process and the file its output goes to."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp/"

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL, as a crash would: no shutdown runs."""
        self.process.kill()
        self.process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """Ctrl-C (uvicorn's graceful shutdown), then SIGKILL after ``timeout`` seconds."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> GatewayProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def start_gateway(
    redis_url: str,
    workdir: Path | None = None,
    *,
    extra_env: dict[str, str] | None = None,
    workers: int = 1,
    package_root: Path | None = None,
    jwt_secret: str = TEST_JWT_SECRET,
    log_level: str = "INFO",
    timeout: float = 60.0,
) -> GatewayProcess:
    """Start the gateway on a free port and wait until /healthz answers.

    ``workdir`` (a new temporary folder when None) holds its data dir (``data``), its source
    root (``sources``) and its log (``gateway-PORT.log``). ``extra_env`` comes last, so it
    can override any of the BB_* settings set here.

    ``package_root`` runs the ``blackboard_mcp`` package found there (another revision's)
    instead of the installed one. The process then starts in that directory: ``python -m``
    puts the working directory first on ``sys.path``, ahead of PYTHONPATH, so a run started
    from a checkout would otherwise run the checkout's code whatever PYTHONPATH says. Which
    package the process imports is checked before it starts.
    """
    workdir = Path(tempfile.mkdtemp(prefix="bb-gateway-")) if workdir is None else workdir
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "sources").mkdir(exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "BB_REDIS_URL": redis_url,
        "BB_JWT_SECRET": jwt_secret,
        "BB_DATA_DIR": str(workdir / "data"),
        "BB_SOURCE_ROOT": str(workdir / "sources"),
        "BB_LOG_LEVEL": log_level,
        **(extra_env or {}),
    }
    if package_root is not None:
        env["PYTHONPATH"] = str(package_root)
        _check_imports_from(package_root, env)
    log_path = workdir / f"gateway-{port}.log"
    command = [sys.executable, "-m", "blackboard_mcp.cli", "serve", "--port", str(port)]
    with log_path.open("wb") as log:
        process = child_process(
            [*command, "--workers", str(workers)],
            env=env,
            cwd=package_root,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    gateway = GatewayProcess(f"http://127.0.0.1:{port}", process, log_path)

    def healthy() -> bool:
        return httpx.get(gateway.url + "/healthz", timeout=1.0).status_code == 200

    wait_until_answering(
        process, healthy, name="the gateway", timeout=timeout, log=gateway.log_text
    )
    return gateway


def stop_gateway(gateway: GatewayProcess) -> None:
    gateway.stop()


def wait_until_answering(
    process: subprocess.Popen[bytes],
    answers: Callable[[], bool],
    *,
    name: str,
    timeout: float,
    log: Callable[[], str] | None = None,
) -> None:
    """Poll ``answers`` until it says yes; the process is killed if it never does.

    Raises:
        GatewayDidNotStart: the process exited first, or ``timeout`` seconds went by; the
            message ends with what ``log`` returns.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise GatewayDidNotStart(f"{name} exited during start{_tail(log)}")
        try:
            if answers():
                return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(0.1)
    process.kill()
    process.wait()
    raise GatewayDidNotStart(f"{name} did not start in {timeout:g} s{_tail(log)}")


def _tail(log: Callable[[], str] | None) -> str:
    return f":\n{log()}" if log is not None else ""


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
        raise GatewayDidNotStart(
            f"the gateway would import {found}, not the package in {package_root}"
        )
