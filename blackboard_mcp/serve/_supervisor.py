"""Watch the embedded Redis and restart it when it dies, with a bounded exponential back-off."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from blackboard_mcp.store import EmbeddedRedis, EmbeddedRedisError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestartPolicy:
    """How hard to try: ``attempts`` restarts in a row, waiting ``first_delay`` doubled each
    time up to ``max_delay``; a Redis that stayed up ``stable_after`` seconds starts afresh."""

    attempts: int = 6
    first_delay: float = 0.25
    max_delay: float = 8.0
    stable_after: float = 60.0
    poll_interval: float = 0.2

    def delay(self, failures: int) -> float:
        return float(min(self.first_delay * 2**failures, self.max_delay))


class RedisSupervisor:
    """Owns the embedded Redis from one thread: starts it, restarts it, stops it.

    One thread does all three, so a restart can never race a stop. (Which thread forks
    Redis does not matter for the parent-death signal: ``spawn`` forks from one thread
    that lives as long as the process.)
    """

    def __init__(
        self,
        *,
        server: EmbeddedRedis,
        policy: RestartPolicy,
        on_give_up: Callable[[], None],
    ) -> None:
        self._server = server
        self._policy = policy
        self._on_give_up = on_give_up
        self._stop = threading.Event()
        self._started = threading.Event()
        self._start_error: EmbeddedRedisError | None = None
        self._thread = threading.Thread(target=self._run, name="embedded-redis", daemon=True)
        self.gave_up = False

    def start(self) -> None:
        """Start Redis (on the supervisor thread) and return once it answers, or raise."""
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            self._thread.join()
            raise self._start_error

    def stop(self) -> None:
        """Shut Redis down cleanly (AOF flushed) and end the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        try:
            self._server.start()
        except EmbeddedRedisError as exc:
            self._start_error = exc
            return
        except Exception as exc:  # anything else must not leave start() waiting for ever
            self._start_error = EmbeddedRedisError(f"embedded Redis failed to start: {exc!r}")
            return
        finally:
            self._started.set()
        try:
            self._watch()
        except Exception:
            log.exception("the embedded Redis supervisor failed")
            self._give_up()
        finally:
            self._server.stop()

    def _watch(self) -> None:
        policy = self._policy
        failures = 0
        up_since = time.monotonic()
        while not self._stop.wait(policy.poll_interval):
            code = self._server.exit_code()
            if code is None:
                if failures and time.monotonic() - up_since > policy.stable_after:
                    failures = 0
                continue
            log.error(
                "embedded Redis exited with code %s (%s): restarting it",
                code,
                self._server.log_tail(),
            )
            self._server.forget()
            while True:
                if failures >= policy.attempts:
                    log.error(
                        "embedded Redis not back after %d restarts in a row: gave up",
                        failures,
                    )
                    self._give_up()
                    return
                delay = policy.delay(failures)
                failures += 1
                log.warning(
                    "restarting embedded Redis in %.2fs (attempt %d of %d)",
                    delay,
                    failures,
                    policy.attempts,
                )
                if self._stop.wait(delay):
                    return
                try:
                    self._server.start()
                except EmbeddedRedisError as exc:
                    log.error("embedded Redis restart failed: %s", exc)
                    continue
                log.warning("embedded Redis restarted (pid %s)", self._server.pid)
                up_since = time.monotonic()
                break

    def _give_up(self) -> None:
        self.gave_up = True
        self._on_give_up()
