"""One `serve` per data dir: an advisory lock held for the life of the process."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ._exits import ExitCode, ServeFailure

LOCK_FILE = "serve.lock"


class DataDirLock:
    """``flock`` on ``<data dir>/serve.lock``, kept open until :meth:`release`.

    The kernel drops the lock when the process dies however it dies, so a stale lock
    cannot keep the next start out; the pid written into the file only names the holder.
    """

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._fd: int | None = None

    def acquire(self) -> DataDirLock:
        path = self._data_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ServeFailure(
                ExitCode.DATA_DIR_IN_USE,
                f"the data dir {self._data_dir} is in use by another `blackboard-mcp serve` "
                f"(pid {holder}); stop that one first or set BB_DATA_DIR to another directory",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)
