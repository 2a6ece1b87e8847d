"""Bind the gateway's port before anything is printed or started."""

from __future__ import annotations

import errno
import socket

from ._exits import ExitCode, ServeFailure


def bind_listener(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening socket for uvicorn, or a one-line ServeFailure naming the port.

    Listening here, not in uvicorn, is what lets `serve` print the endpoint and the
    first admin token only once the port is known to be ours: connections that arrive
    before the gateway is up wait in the backlog.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            reason = "is already in use"
        else:
            reason = f"cannot be bound ({exc.strerror or exc})"
        raise ServeFailure(
            ExitCode.PORT_UNAVAILABLE,
            f"port {port} on {host} {reason}; stop what holds it or choose another "
            "with --port (BB_PORT)",
        ) from None
    # uvicorn hands the socket to its worker processes when --workers > 1.
    sock.set_inheritable(True)
    return sock
