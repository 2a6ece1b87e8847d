"""Process plumbing for the embedded Redis: die with the parent, find an orphan, stop it.

Linux specifics (``prctl``, ``/proc``) degrade to no-ops elsewhere: the data-dir lock and the
clean shutdown on a signal still hold there, only the SIGKILL-of-the-parent case does not.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, cast

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not Path("/proc/self").exists():
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None
    prctl: Callable[..., int] | None = getattr(libc, "prctl", None)
    return prctl


# Resolved once, in the parent: the child between fork and exec must not load libraries or
# take locks another thread of the parent may have held at the fork.
_PRCTL = _load_prctl()


def set_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent (thread) exits."""
    return _PRCTL is not None and _PRCTL(_PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to SIGTERM the child when its parent goes.

    The kernel sends it when the *thread* that forked exits, not the whole process: a child
    forked from a short-lived thread (``asyncio.to_thread``, an executor) would be stopped
    when that thread ends. So children are forked by :func:`spawn`, from one thread that
    lives as long as the process. SIGTERM, not SIGKILL: Redis answers it with a clean
    shutdown that flushes the AOF.
    """
    if _PRCTL is None:
        return None
    prctl = _PRCTL
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        # The parent may have died between the fork and the prctl: nobody would signal us.
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _is_redis_on(pid: int, directory: Path) -> bool:
    """True when ``pid`` is a redis-server whose working directory is ``directory``.

    Redis rewrites its process title, so the command line cannot tell; its executable and
    its working directory (Redis chdirs into its ``dir``) can, and a recycled pid fails both.
    """
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        cwd = os.readlink(f"/proc/{pid}/cwd")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == "Z":
        return False
    return Path(exe).name.startswith("redis-server") and Path(cwd) == directory.resolve()


def stop_orphan(pid_file: Path, directory: Path, timeout: float = 10.0) -> int | None:
    """Stop a redis-server left running on ``directory`` by an earlier process; its pid or None.

    SIGTERM first (Redis shuts down cleanly and flushes its AOF), SIGKILL after ``timeout``.
    """
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if pid == os.getpid() or not _is_redis_on(pid, directory):
        return None
    log.warning("stopping an embedded Redis (pid %d) left running on %s", pid, directory)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not _wait_gone(pid, directory, timeout):
        log.warning("embedded Redis pid %d ignored SIGTERM for %.0fs: killing it", pid, timeout)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_gone(pid, directory, 5.0)
    return pid


def _wait_gone(pid: int, directory: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _is_redis_on(pid, directory):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


_Request = tuple[Sequence[str], dict[str, Any], "Future[subprocess.Popen[bytes]]"]


class _Spawner:
    """Forks every embedded Redis from one daemon thread that lives as long as the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            # After a fork the thread object says it is not alive: start a new one.
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="embedded-redis-spawner", daemon=True
                )
                self._thread.start()
        future: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((args, kwargs, future))
        return future.result()

    def _run(self) -> None:
        while True:
            args, kwargs, future = self._requests.get()
            try:
                # Never text mode here: the overloads cannot see that through **kwargs.
                future.set_result(cast("subprocess.Popen[bytes]", subprocess.Popen(args, **kwargs)))
            except BaseException as exc:
                future.set_exception(exc)


_SPAWNER = _Spawner()


def spawn(
    args: Sequence[str], *, also_in_child: Callable[[], None] | None = None, **kwargs: Any
) -> subprocess.Popen[bytes]:
    """``subprocess.Popen`` for a child that dies with this process, whichever thread asks.

    The child gets SIGTERM from the kernel when this process ends, however it ends (a
    SIGKILL included), and not before: see :func:`die_with_parent`. ``also_in_child`` runs
    in the child after that, before the exec.
    """
    steps = [step for step in (die_with_parent(), also_in_child) if step is not None]

    def preexec() -> None:
        for step in steps:
            step()

    return _SPAWNER.popen(args, preexec_fn=preexec if steps else None, **kwargs)
