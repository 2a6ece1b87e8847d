"""The order of a `serve` start and stop, and the signals in between.

Start: the data dir lock, the port, the embedded Redis; only then may the caller print the
endpoint and a first admin token, and run the gateway. Stop (SIGTERM, SIGINT, SIGHUP, or the
embedded Redis gone for good): the gateway drains, Redis shuts down with its AOF flushed, the
runtime files go, and the exit status says which it was (ExitCode).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from blackboard_mcp.settings import Settings
from blackboard_mcp.store import (
    EmbeddedRedis,
    EmbeddedRedisError,
    make_private_dir,
    write_private,
)

from ._datadir import DataDirLock
from ._exits import ExitCode, ServeFailure
from ._listen import bind_listener
from ._supervisor import RedisSupervisor, RestartPolicy
from ._worker import app_factory

log = logging.getLogger(__name__)

EMBEDDED_URL_FILE = "redis.url"
# SIGHUP too: a closed terminal should stop `serve` cleanly, not leave its Redis behind.
# With --workers > 1 uvicorn's own supervisor takes SIGHUP to mean "restart the workers".
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_Handler = Callable[[int, FrameType | None], Any] | int | None


class Serving:
    """Context manager around one `serve`: entered, it owns the data dir, the port and a
    running embedded Redis (unless ``BB_REDIS_URL`` names one); :meth:`run` runs the gateway.

    Where and how many: ``settings.host``, ``settings.port``, ``settings.workers``.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._host = settings.host
        self._port = settings.port
        self._workers = settings.workers
        self._lock: DataDirLock | None = None
        self._listener: socket.socket | None = None
        self._supervisor: RedisSupervisor | None = None
        self._url_file: Path | None = None
        self._metrics_dir: Path | None = None
        self._previous: dict[int, _Handler] = {}
        self._signalled: int | None = None
        self._exit_code = ExitCode.STOPPED
        self._request_stop: Callable[[], None] = lambda: None
        self.redis_url = settings.redis_url or ""

    @property
    def embedded(self) -> bool:
        return not self._settings.redis_url

    @property
    def endpoint(self) -> str:
        assert self._listener is not None
        port = self._listener.getsockname()[1]
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{port}/mcp/"

    def __enter__(self) -> Serving:
        try:
            self._enter()
        except BaseException:
            self._cleanup()
            raise
        return self

    def _enter(self) -> None:
        settings = self._settings
        from blackboard_mcp.gateway import configure_logging

        configure_logging(settings.log_level, settings.log_format)
        # The port first: a busy one exits 3 and leaves no data dir or lock behind.
        self._listener = bind_listener(self._host, self._port)
        make_private_dir(settings.data_dir)
        if self.embedded:
            self._lock = DataDirLock(settings.data_dir).acquire()
        # From here a stop signal is recorded and honoured in order, never half-way.
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        if self.embedded:
            self._start_redis()

    def _start_redis(self) -> None:
        settings = self._settings
        server = EmbeddedRedis(
            data_dir=settings.data_dir / "redis", appendfsync=settings.appendfsync
        )
        supervisor = RedisSupervisor(
            server=server,
            policy=RestartPolicy(attempts=settings.embedded_restarts),
            on_give_up=self._give_up,
        )
        try:
            supervisor.start()
        except EmbeddedRedisError as exc:
            raise ServeFailure(
                ExitCode.REDIS_FAILED, f"the embedded Redis: {exc.message}"
            ) from None
        self._supervisor = supervisor
        # The workers are on this machine: the Unix socket, where it can be.
        self.redis_url = server.local_url
        # The one place the CLI (health, token, audit) finds the URL, password included: over
        # TCP, which redis-cli and other tools take too.
        self._url_file = settings.data_dir / EMBEDDED_URL_FILE
        write_private(self._url_file, server.url + "\n")

    def _on_signal(self, sig: int, _frame: FrameType | None) -> None:
        if self._signalled is None:
            self._signalled = sig
        self._request_stop()

    def _give_up(self) -> None:
        # Called on the supervisor thread: only flags, which the main thread polls.
        self._exit_code = ExitCode.REDIS_FAILED
        self._request_stop()

    def run(self, settings: Settings | None = None) -> int:
        """Run the gateway until a stop signal or a lost Redis; returns the exit status.

        ``settings``: the gateway's, if the caller has decided more since (a signing key);
        the Redis this `serve` started is filled in either way.
        """
        if self._signalled is not None or self._exit_code != ExitCode.STOPPED:
            return int(self._exit_code)
        import uvicorn

        from blackboard_mcp._uvicorn_adapter import WorkerProcesses, server_options

        assert self._listener is not None
        gateway_settings = (settings or self._settings).model_copy(
            update={"redis_url": self.redis_url, "host": self._host}
        )
        json_logs = gateway_settings.log_format == "json"
        metrics_dir = self._share_metrics() if self._workers > 1 else None
        app = app_factory(
            gateway_settings,
            serve_pid=os.getpid() if self._workers > 1 else None,
            metrics_dir=metrics_dir,
        )
        config = uvicorn.Config(
            app,
            factory=True,
            workers=self._workers,
            log_level=gateway_settings.log_level.lower(),
            # uvicorn's own lines go through the same JSON handler rather than its text one.
            log_config=None if json_logs else uvicorn.config.LOGGING_CONFIG,
            access_log=False,
            **server_options(gateway_settings),
        )
        if self._workers > 1:
            supervisor = WorkerProcesses(config, self._listener)
            # It takes over SIGINT, SIGTERM and SIGHUP and returns on the first two.
            self._request_stop = supervisor.stop
            if self._exit_code != ExitCode.STOPPED:
                return int(self._exit_code)
            supervisor.run()
            return int(self._exit_code)
        server = uvicorn.Server(config)

        def stop_server() -> None:
            server.should_exit = True

        self._request_stop = stop_server
        # A stop that came while the gateway was being built.
        if self._signalled is not None or self._exit_code != ExitCode.STOPPED:
            return int(self._exit_code)
        # uvicorn answers SIGINT and SIGTERM itself, then re-raises the signal once it has
        # drained: into _on_signal, installed above, so this returns and cleanup runs.
        server.run(sockets=[self._listener])
        if not server.started and self._signalled is None:
            return int(ExitCode.PORT_UNAVAILABLE)
        return int(self._exit_code)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._cleanup()

    def _share_metrics(self) -> Path:
        # The workers count their metrics into one directory, which every scrape adds up
        # (gateway/_metrics.py). Files of a previous run would be counted again: the
        # directory starts empty.
        directory = self._settings.data_dir / "metrics"
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(mode=0o700, parents=True)
        self._metrics_dir = directory
        return directory

    def _cleanup(self) -> None:
        if self._metrics_dir is not None:
            shutil.rmtree(self._metrics_dir, ignore_errors=True)
            self._metrics_dir = None
        if self._supervisor is not None:
            self._supervisor.stop()
            self._supervisor = None
            log.info("embedded Redis stopped")
        if self._url_file is not None:
            self._url_file.unlink(missing_ok=True)
            self._url_file = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
