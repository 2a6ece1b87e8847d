"""Reading one file beneath a root directory that callers may be changing under our feet.

Nothing here checks a path and then opens it: a check on a path says nothing about what
the same path names a moment later (a directory swapped for a symlink, a file for a FIFO).
Instead the walk opens the root once and then each component relative to the directory
fd of the one before, with ``O_NOFOLLOW``, so no symlink is ever followed and ``..`` is
refused before any open. What is finally read is decided by ``fstat`` on the opened fd.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .._errors import InvalidArgument, NotFound, TooLarge, Unavailable

_ARG = "source_path"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. O_NOCTTY: a
# terminal device must never become the server's controlling terminal. Both are refused
# by the fstat check right after; the flags make sure the open itself cannot hang.
_FILE_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
)
_READ_CHUNK = 1024 * 1024
MAX_PATH_CHARS = 4096  # Linux's PATH_MAX
# Out of file handles or memory: the server's trouble, not the caller's path.
_SERVER_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


@dataclass(frozen=True)
class ConfinedFile:
    relative_path: str  # the components joined with "/", exactly as read
    data: bytes


def supported() -> bool:
    """Whether this platform can open relative to a directory fd without following links."""
    return os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")


def components(source_path: str) -> list[str]:
    """The path's names, refusing anything but plain names separated by single slashes."""
    if len(source_path) > MAX_PATH_CHARS:
        # Each component costs an open: a megabyte of "a/a/a/..." would be half a million.
        raise InvalidArgument(
            f"source_path has {len(source_path)} characters; the limit is {MAX_PATH_CHARS}",
            argument=_ARG,
        )
    if source_path.startswith("/"):
        raise InvalidArgument(
            f"source_path {source_path!r} is absolute",
            hint="give a path relative to the board's source root",
            argument=_ARG,
        )
    parts = source_path.split("/")
    if ".." in parts:
        # One message whether or not the outside file exists, so the root is no probe.
        raise InvalidArgument(
            f"source_path {source_path!r} is outside the board's source root",
            hint="give a path relative to the source root, without leaving it",
            argument=_ARG,
        )
    if any(part in ("", ".") for part in parts):
        raise InvalidArgument(
            f"source_path {source_path!r} has an empty or '.' component",
            hint="write it as names separated by single slashes, e.g. docs/notes.md",
            argument=_ARG,
        )
    return parts


def read_confined(root: Path, source_path: str, *, max_bytes: int) -> ConfinedFile:
    """Read ``source_path`` beneath ``root``: no symlinks, regular files only, size capped."""
    parts = components(source_path)
    with contextlib.ExitStack() as fds:
        try:
            # The root itself is operator configuration and may be reached through links.
            directory = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
        except OSError:
            raise InvalidArgument(
                "the board's source root does not exist or cannot be read",
                hint="ask the operator to check BB_SOURCE_ROOT",
                argument=_ARG,
            ) from None
        fds.callback(os.close, directory)
        for name in parts[:-1]:
            directory = _open_at(directory, name, _DIRECTORY_FLAGS | _CLOEXEC, source_path)
            fds.callback(os.close, directory)
        fd = _open_at(directory, parts[-1], _FILE_FLAGS | _CLOEXEC, source_path)
        fds.callback(os.close, fd)
        data = _read_regular(fd, source_path, max_bytes)
    return ConfinedFile("/".join(parts), data)


def _open_at(directory: int, name: str, flags: int, source_path: str) -> int:
    try:
        return os.open(name, flags, dir_fd=directory)
    except OSError as exc:
        raise _refusal(exc, directory, name, source_path) from None


def _refusal(exc: OSError, directory: int, name: str, source_path: str) -> Exception:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(directory, name):
        return InvalidArgument(
            f"source_path {source_path!r} goes through a symbolic link; links are not followed",
            hint="name the file by its real path under the source root",
            argument=_ARG,
        )
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return NotFound(f"source_path {source_path!r} does not exist", argument=_ARG)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return InvalidArgument(
            f"source_path {source_path!r} cannot be read by the board (permission denied)",
            hint="ask the operator to make it readable to the server, or pick another file",
            argument=_ARG,
        )
    if exc.errno in _SERVER_ERRNOS:
        return Unavailable(
            "the server cannot open more files right now", hint="retry in a few seconds"
        )
    reason = errno.errorcode.get(exc.errno or 0, "error")
    return InvalidArgument(
        f"source_path {source_path!r} cannot be opened ({reason})", argument=_ARG
    )


def _is_symlink(directory: int, name: str) -> bool:
    # Only chooses the wording of a refusal; the refusal itself came from the open.
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _read_regular(fd: int, source_path: str, max_bytes: int) -> bytes:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise InvalidArgument(f"source_path {source_path!r} is not a regular file", argument=_ARG)
    if info.st_nlink > 1:
        # A second hard link may be a name for a file the caller could not otherwise reach
        # (where the kernel's protected_hardlinks is off); links are not followed here.
        raise InvalidArgument(
            f"source_path {source_path!r} has more than one hard link; such files are not read",
            hint="copy the file rather than linking it",
            argument=_ARG,
        )
    check_size(info.st_size, max_bytes)
    chunks: list[bytes] = []
    wanted = max_bytes + 1  # one byte past the limit: a file that grew since fstat is refused
    while wanted > 0:
        try:
            chunk = os.read(fd, min(wanted, _READ_CHUNK))
        except OSError as exc:
            reason = errno.errorcode.get(exc.errno or 0, "error")
            raise InvalidArgument(
                f"source_path {source_path!r} could not be read ({reason})", argument=_ARG
            ) from None
        if not chunk:
            break
        chunks.append(chunk)
        wanted -= len(chunk)
    data = b"".join(chunks)
    check_size(len(data), max_bytes)
    return data


def check_size(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise TooLarge(
            f"the file has {size} bytes; the limit for source_path is {max_bytes}",
            argument=_ARG,
            size_bytes=size,
            max_bytes=max_bytes,
        )
