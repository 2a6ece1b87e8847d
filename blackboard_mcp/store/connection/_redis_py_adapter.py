"""The adapter to redis-py: everything the store takes from it beyond its documented API.

The store's own connection (store/connection/_wire.py) and the cluster placement need three things
redis-py has but does not document: the exception class it gives each error reply (so a
reply on our connection raises what redis-py would raise: ``MovedError``, ``AskError``...),
the TLS context a ``rediss://`` URL configures (so both kinds of connection use one), and
the cluster client's slot map (so a primary's search index is named from slots it owns).
The board's waiting pool (store/connection/_pool.py) also hooks into redis-py's
``ConnectionPool``: it overrides how the pool lends, takes back, resets and closes its
connections, and reads the settings it builds them from (``SlotBoundPool``).
They live here and nowhere else, and the package caps redis-py at the releases this module
was tested against (``TESTED``, the same range as pyproject.toml's). A release outside it
may move any of them; ``tests/test_library_ranges.py`` fails with the range it needs.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from importlib.metadata import version
from typing import Any

import redis.asyncio as aioredis
from redis._parsers.base import BaseParser  # type: ignore[import-untyped, unused-ignore]
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import ResponseError

# Keep equal to pyproject.toml's redis requirement (a test holds them together).
TESTED = ">=8.1,<8.3"


def installed_version() -> str:
    return version("redis")


def error_reply(text: str) -> ResponseError:
    """The exception redis-py raises for the error reply ``text`` (``MOVED 12 h:p`` ...)."""
    return BaseParser.parse_error(text)  # type: ignore[no-any-return, no-untyped-call]


def tls_context(connection: Any) -> ssl.SSLContext | None:
    """The TLS context of a (never connected) redis-py connection; None for plain TCP."""
    wrapper = getattr(connection, "ssl_context", None)
    return None if wrapper is None else wrapper.get()  # type: ignore[no-any-return, unused-ignore]


async def reload_slot_map(cluster: RedisCluster[bytes]) -> None:
    """Read the cluster's slot map again (after MOVED, or a failover)."""
    await cluster.nodes_manager.initialize()


def slot_owner(cluster: RedisCluster[bytes], slot: int) -> ClusterNode | None:
    """The primary that owns ``slot`` in the last slot map read."""
    owners = cluster.nodes_manager.slots_cache.get(slot)
    return owners[0] if owners else None


class SlotBoundPool(aioredis.ConnectionPool):  # type: ignore[type-arg]
    """redis-py's asyncio pool whose every lent connection holds one of the subclass's slots.

    ``take_slot`` runs before the base pool lends a connection and ``free_slot`` after it is
    given back; ``forget_slots`` when the pool resets (after a fork: connections lent before
    are no longer this process's), ``close_own_connections`` before it disconnects.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # The redis-py connections lent by get_connection, each holding one slot.
        self._holders: set[Any] = set()

    async def take_slot(self) -> None:
        raise NotImplementedError

    def free_slot(self) -> None:
        raise NotImplementedError

    def forget_slots(self) -> None:
        raise NotImplementedError

    def close_own_connections(self) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        super().reset()
        self._holders = set()
        self.forget_slots()

    async def disconnect(self, inuse_connections: bool = True) -> None:
        self.close_own_connections()
        await super().disconnect(inuse_connections)

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        await self.take_slot()
        try:
            connection = await super().get_connection(*args, **kwargs)
        except BaseException:
            # The base pool gives back (through release()) a connection it could not
            # connect; that one never held a slot, so the slot is freed here.
            self.free_slot()
            raise
        self._holders.add(connection)
        return connection

    async def release(self, connection: Any) -> None:
        held = connection in self._holders
        self._holders.discard(connection)
        try:
            await super().release(connection)
        finally:
            if held:
                self.free_slot()


def pool_settings(pool: aioredis.ConnectionPool) -> tuple[type[Any], Mapping[str, Any]]:  # type: ignore[type-arg]
    """The class and keyword arguments a redis-py pool builds its connections from."""
    return pool.connection_class, pool.connection_kwargs
