"""A Redis connection that packs commands with hiredis, as redis-py's sync client does.

redis-py's asyncio connection packs every command in Python (``pack_command``, its encoder
and a buffer loop), even when ``hiredis`` is installed; its sync client packs with
``hiredis.pack_command``. Under a compare-and-swap write load that Python packing was about
a sixth of the gateway's CPU. This class reuses redis-py's own hiredis packer (hiredis is a
dependency of the package), so arguments are checked the same way (``DataError`` for a type
Redis cannot take). The store's own connection packs its commands itself (store/_wire.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import redis.asyncio as aioredis
from redis.connection import HiredisRespSerializer  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8

_PACKER = HiredisRespSerializer()


class PackedConnection(aioredis.Connection):
    """A TCP connection whose commands are packed in C."""

    def pack_command(self, *args: Any) -> list[bytes]:
        return _PACKER.pack(*args)  # type: ignore[no-any-return]

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        # One buffer for the whole pipeline: one write to the socket.
        return [b"".join(chunk for command in commands for chunk in _PACKER.pack(*command))]
