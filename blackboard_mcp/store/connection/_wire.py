"""A Redis connection for transactions: one round trip is one write and one wake-up.

redis-py's asyncio connection reads each reply with its own ``await`` through a
``StreamReader`` (a buffer copy, a parser feed and a future per read), and its pool checks a
connection's socket each time it lends one. A compare-and-swap write makes two round trips
of three to six commands each, so that machinery cost more of the gateway's CPU than
everything Redis did for the write. Measured side by side on the CAS floor
(``bench/cas_load.py``): the same commands cost half the CPU per write on this connection.

A ``WireConnection`` is an ``asyncio.Protocol`` with a ``hiredis.Reader``: ``round_trip``
writes one packed buffer and sleeps on one future until the reader holds as many replies as
commands were sent. Error replies are values (the exception classes redis-py's parser
gives them: ``MovedError``, ``AskError``, ``ResponseError``...), so a caller stays in step
with the connection whatever Redis answers. Anything else that interrupts a round trip
(the connection closing, a cancelled caller, a reply hiredis cannot parse) closes the
connection: a late reply can never reach the next caller.

It connects as redis-py would from the pool's own settings (host and port or a Unix socket
path, TLS with redis-py's own context, AUTH, SELECT, client name), so one URL configures
both kinds of connection; what that takes of redis-py beyond its documented API is in
store/connection/_redis_py_adapter.py. It always speaks RESP2, whose reply shapes the store reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, cast

import hiredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, InvalidResponse, RedisError

from ._redis_py_adapter import error_reply, tls_context

_CLOSED = "the connection to the board's Redis closed"
_INCOMPLETE = object()


class WireClosed(RedisConnectionError):
    """The wire was closed before anything was sent on it: sending elsewhere is safe."""


class WireConnection(asyncio.Protocol):
    """One connection to Redis that answers whole round trips."""

    def __init__(self) -> None:
        self._reader = hiredis.Reader(
            protocolError=InvalidResponse,
            replyError=error_reply,
            notEnoughData=_INCOMPLETE,  # a sentinel no reply can be equal to
        )
        self._transport: asyncio.Transport | None = None
        self._replies: list[Any] = []
        self._expected = 0
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._failure: BaseException | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, though they are its kind.
        self._transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        replies = self._replies
        try:
            while (reply := reader.gets()) is not _INCOMPLETE:
                replies.append(reply)
        except InvalidResponse as exc:
            self._fail(_as_connection_error(exc))
            return
        if self._waiter is None:
            # Nobody asked: Redis sent what it should not have. The connection is out of step.
            self._fail(RedisConnectionError(f"{_CLOSED}: a reply came that nobody asked for"))
        elif len(replies) >= self._expected and not self._waiter.done():
            self._waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._fail(RedisConnectionError(_CLOSED) if exc is None else _as_connection_error(exc))

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost follows

    # the connection

    @property
    def is_connected(self) -> bool:
        return not self._closed

    async def round_trip(self, packed: bytes, count: int) -> list[Any]:
        """Send ``packed`` (``count`` commands); their ``count`` replies, errors as values."""
        if self._closed or self._transport is None:
            raise WireClosed(_CLOSED) from self._failure
        waiter = asyncio.get_running_loop().create_future()
        self._replies = []
        self._expected = count
        self._waiter = waiter
        try:
            self._transport.write(packed)
            await waiter
        except BaseException:
            # Cancelled (the operation's deadline) or failed mid-way: replies may still come.
            self.close()
            raise
        finally:
            self._waiter = None
        replies = self._replies
        if len(replies) != count:
            self.close()
            raise RedisConnectionError(f"{_CLOSED}: {len(replies)} replies to {count} commands")
        self._replies = []
        return replies

    def close(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.abort()

    def _fail(self, exc: BaseException) -> None:
        self._failure = exc
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        if not self._closed:
            self.close()


def _as_connection_error(exc: BaseException) -> RedisError:
    error = RedisConnectionError(f"{_CLOSED}: {exc}")
    error.__cause__ = exc
    return error


async def open_wire(
    wire_class: type[WireConnection], connection_class: type[Any], settings: Mapping[str, Any]
) -> WireConnection:
    """A connected, authenticated ``WireConnection`` to the Redis a redis-py pool points at.

    ``connection_class`` and ``settings`` are the pool's own: a redis-py connection built
    from them (never connected) says where to connect and with which TLS context.
    """
    probe = connection_class(**settings)
    loop = asyncio.get_running_loop()
    path = getattr(probe, "path", None)
    ssl_context = tls_context(probe)
    timeout = getattr(probe, "socket_connect_timeout", None)
    try:
        async with asyncio.timeout(timeout):
            if path:
                _, wire = await loop.create_unix_connection(wire_class, path)
            elif ssl_context is not None:
                _, wire = await loop.create_connection(
                    wire_class, probe.host, probe.port, ssl=ssl_context
                )
            else:
                _, wire = await loop.create_connection(wire_class, probe.host, probe.port)
    except TimeoutError as exc:
        raise RedisConnectionError(f"connecting to the board's Redis timed out: {exc}") from exc
    except OSError as exc:
        raise _as_connection_error(exc) from exc
    try:
        await _handshake(wire, settings)
    except BaseException:
        wire.close()
        raise
    return wire


async def _handshake(wire: WireConnection, settings: Mapping[str, Any]) -> None:
    # Always RESP2, whatever protocol the URL asks redis-py for: the store reads these raw
    # replies in RESP2's shapes (a flat member/score list, a set as a list).
    commands: list[tuple[Any, ...]] = []
    password, username = settings.get("password"), settings.get("username")
    if password is not None:
        commands.append(("AUTH", username, password) if username else ("AUTH", password))
    if settings.get("db"):
        commands.append(("SELECT", settings["db"]))
    if settings.get("client_name"):
        commands.append(("CLIENT", "SETNAME", settings["client_name"]))
    if commands:
        first_error(await wire.round_trip(pack(commands), len(commands)))


def pack(commands: Sequence[tuple[Any, ...]]) -> bytes:
    """``commands`` as one buffer for ``round_trip``.

    The store's commands are one-word names with str, bytes, int or float arguments, which
    hiredis packs as they are (redis-py's serializer first splits names like ``CONFIG SET``
    and copies every argument, three times the cost for a write's EVAL of fifty arguments).
    """
    try:
        return b"".join([hiredis.pack_command(command) for command in commands])
    except TypeError as exc:
        # A type Redis cannot take (None, a dict...): a bug of the store, named as redis-py does.
        raise DataError(str(exc)) from exc


def first_error(replies: list[Any]) -> list[Any]:
    """``replies``, unless one is an error reply: then that error is raised.

    Whatever its class: redis-py names some error replies by what they mean for the
    connection (``-LOADING`` after a restart is a BusyLoadingError, a ConnectionError)."""
    for reply in replies:
        if isinstance(reply, RedisError):
            raise reply
    return replies


class Wires:
    """The open ``WireConnection``s of one pool: the idle ones, most recently used first,
    and the lent ones, so that closing the pool closes those too (as redis-py's
    ``disconnect`` does with its connections in use)."""

    def __init__(self) -> None:
        self._idle: deque[WireConnection] = deque()
        self._lent: set[WireConnection] = set()

    def take(self) -> WireConnection | None:
        while self._idle:
            wire = self._idle.pop()
            if wire.is_connected:
                self._lent.add(wire)
                return wire
        return None

    def lent(self, wire: WireConnection) -> None:
        self._lent.add(wire)

    def give_back(self, wire: WireConnection) -> bool:
        """Take ``wire`` back (idle, if it is still open); False if it was not lent from here
        (from before the pool was reset in a forked process)."""
        if wire not in self._lent:
            return False
        self._lent.discard(wire)
        if wire.is_connected:
            self._idle.append(wire)
        return True

    def close_all(self) -> None:
        """Close every wire; a lent one is still given back, closed, by its borrower."""
        wires = [*self._idle, *self._lent]
        self._idle.clear()
        for wire in wires:
            with contextlib.suppress(Exception):
                wire.close()
