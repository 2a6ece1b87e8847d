"""Keys that earlier versions wrote and this one neither reads nor writes, removed at start.

Each topic kept a sorted set of all its notes by recency (``keys.by_recent``), the union of its
three sets by kind; ``recent`` order and the change feed now merge those (store/reads/_paging.py).
Every start removes the old sets of the registered workspaces, so a gateway of the earlier
version still writing them during a rolling upgrade leaves none behind once it is replaced.
"""

from __future__ import annotations

import logging

from . import _key_names as keys
from ._board_client import RedisCommands

log = logging.getLogger(__name__)


async def drop_retired_keys(client: RedisCommands) -> int:
    """Remove the retired per-topic recency sets; returns how many there were.

    One SMEMBERS for the registry, one round trip for every workspace's topics, one for the
    removals (a workspace's keys share its hash tag, so one UNLINK each, also on a cluster).
    """
    async with client.operation():
        workspaces = sorted(w.decode() for w in await client.redis.smembers(keys.workspaces()))
        if not workspaces:
            return 0
        pipe = client.redis.pipeline(transaction=False)
        for ws in workspaces:
            pipe.smembers(keys.topics(ws))
        found = await pipe.execute()
        pipe = client.redis.pipeline(transaction=False)
        queued = 0
        for ws, topics in zip(workspaces, found, strict=True):
            if topics:
                # Not pipe.unlink: a cluster pipeline splits that by slot in a coroutine of its
                # own; these keys share the workspace's slot.
                names = [keys.by_recent(ws, t.decode()) for t in sorted(topics)]
                pipe.execute_command("UNLINK", *names)
                queued += 1
        removed = sum(int(n) for n in await pipe.execute()) if queued else 0
    if removed:
        log.info("removed %d per-topic recency sets of an earlier version", removed)
    return removed
