"""The adapter to redis-py: everything the store takes from it beyond its documented API.

The store's own connection (store/connection/_wire.py) and the cluster placement need three things
redis-py has but does not document: the exception class it gives each error reply (so a
reply on our connection raises what redis-py would raise: ``MovedError``, ``AskError``...),
the TLS context a ``rediss://`` URL configures (so both kinds of connection use one), and
the cluster client's slot map (so a primary's search index is named from slots it owns).
They live here and nowhere else, and the package caps redis-py at the releases this module
was tested against (``TESTED``, the same range as pyproject.toml's). A release outside it
may move any of them; ``tests/test_library_ranges.py`` fails with the range it needs.
"""

from __future__ import annotations

import ssl
from importlib.metadata import version
from typing import Any

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
