"""The RediSearch index over notes, created idempotently at start-up."""

from __future__ import annotations

import asyncio
import logging
import time

import redis.asyncio as aioredis
from redis.commands.search.field import NumericField, TagField, TextField
from redis.commands.search.index_definition import IndexDefinition, IndexType
from redis.exceptions import ResponseError

from . import _keys as keys
from ._redis_errors import mapped_redis_errors

log = logging.getLogger(__name__)

DIGEST_WEIGHT = 5.0

SCHEMA = (
    TagField("ws"),
    TagField("topic"),
    TagField("kind"),
    TextField("digest", weight=DIGEST_WEIGHT),
    TextField("body"),
    # The searchable head of an offloaded body (see _writes.SEARCH_TEXT_BYTES).
    TextField("stext"),
    NumericField("updated", sortable=True),
)


async def ensure_index(client: aioredis.Redis[bytes], name: str = keys.INDEX_NAME) -> bool:
    """Create the index unless it exists. Returns True when it was created now."""
    async with mapped_redis_errors():
        try:
            await client.ft(name).info()  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            return False
        except ResponseError as exc:
            if "no such index" not in str(exc).lower() and "unknown index" not in str(exc).lower():
                raise
        try:
            await client.ft(name).create_index(
                SCHEMA,
                definition=IndexDefinition(prefix=[keys.NOTE_PREFIX], index_type=IndexType.HASH),  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
                # NOOFFSETS: no term positions. They serve exact phrases, SLOP/INORDER and
                # highlighting, none of which search_keys asks for (it ORs single words);
                # they were a third of the index's memory. Field flags and frequencies
                # stay: without them a digest match no longer ranks above a body match.
                no_term_offsets=True,
                # Notes are small summaries; stop-word removal would make "the plan" match
                # everything with "plan" and nothing else, which is what we want anyway,
                # so keep RediSearch's defaults.
            )
        except ResponseError as exc:
            # Another gateway process won the race to create it.
            if "already exists" not in str(exc).lower():
                raise
            return False
    log.info("created search index %s", name)
    return True


async def retire_old_indexes(client: aioredis.Redis[bytes]) -> list[str]:
    """Drop the indexes of earlier versions (their notes stay); returns the names dropped.

    A gateway of the earlier version still running during a rolling upgrade recreates its
    index on its next search; the next start of a gateway of this version drops it again.
    """
    dropped = []
    async with mapped_redis_errors():
        for name in keys.RETIRED_INDEX_NAMES:
            try:
                # Without DD: the documents are the notes this version's index covers too.
                await client.execute_command("FT.DROPINDEX", name)  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            except ResponseError as exc:
                message = str(exc).lower()
                if "unknown index" not in message and "no such index" not in message:
                    raise
                continue
            dropped.append(name)
            log.info("dropped the retired search index %s (its notes are kept)", name)
    return dropped


async def index_ready(client: aioredis.Redis[bytes], name: str = keys.INDEX_NAME) -> bool:
    """True when the index exists and has finished its initial scan."""
    async with mapped_redis_errors():
        try:
            info = await client.ft(name).info()  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
        except ResponseError:
            return False
    indexing = info.get("indexing", 0)
    return str(indexing) in ("0", "0.0", "b'0'")


async def wait_until_indexed(
    client: aioredis.Redis[bytes], *, timeout: float, name: str = keys.INDEX_NAME
) -> bool:
    """Wait for a newly created index's background scan of existing notes; False on timeout.

    Until the scan is done the index answers from the notes scanned so far: a search right
    after a rebuild found none of the notes that were already there.
    """
    deadline = time.monotonic() + timeout
    while not await index_ready(client, name):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True
