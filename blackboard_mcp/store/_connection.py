"""A Redis connection that packs commands with hiredis, as redis-py's sync client does.

redis-py's asyncio connection packs every command in Python (``pack_command``, its encoder
and a buffer loop), even when ``hiredis`` is installed; its sync client packs with
``hiredis.pack_command``. Under a compare-and-swap write load that Python packing was about
a sixth of the gateway's CPU. This class reuses redis-py's own hiredis packer, so
arguments are checked the same way (``DataError`` for a type Redis cannot take).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.connection import HiredisRespSerializer  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8
from redis.exceptions import DataError
from redis.utils import HIREDIS_AVAILABLE

_PACKER = HiredisRespSerializer() if HIREDIS_AVAILABLE else None
if HIREDIS_AVAILABLE:
    from hiredis import pack_command as _pack_command


class PackedConnection(aioredis.Connection):
    """A TCP connection whose commands are packed in C when hiredis is importable."""

    def pack_command(self, *args: Any) -> list[bytes]:
        if _PACKER is None:
            return super().pack_command(*args)
        return _PACKER.pack(*args)  # type: ignore[no-any-return]

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        if _PACKER is None:
            return super().pack_commands(commands)
        # One buffer for the whole pipeline: one write to the socket.
        return [b"".join(chunk for command in commands for chunk in _PACKER.pack(*command))]


def pack_plain(connection: Any, commands: Sequence[tuple[Any, ...]]) -> list[bytes]:
    """``commands`` as one buffer, for commands the store writes itself.

    Each command's name is one word and its arguments are str, bytes, int or float, so
    hiredis packs it as it is: redis-py's serializer first splits a name like ``CONFIG SET``
    and copies every argument into a new tuple, three times the cost for a write's EVAL of
    some fifty arguments. Without hiredis, the connection's own packer.
    """
    if not HIREDIS_AVAILABLE:
        return list(connection.pack_commands(commands))
    try:
        return [b"".join([_pack_command(command) for command in commands])]
    except TypeError as exc:
        raise DataError(str(exc)) from exc
