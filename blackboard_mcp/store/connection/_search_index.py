"""The RediSearch index over notes, created idempotently at start-up."""

from __future__ import annotations

import asyncio
import logging
import time

from redis.commands.search.field import Field, NumericField, TagField, TextField
from redis.commands.search.index_definition import IndexDefinition, IndexType
from redis.exceptions import ResponseError

from . import _key_names as keys
from ._board_client import RedisCommands
from ._field_names import FIELD

log = logging.getLogger(__name__)

# How much more a digest match counts than a match anywhere in the note (store/search/_search.py).
DIGEST_WEIGHT = 5.0

# Two indexes over the same notes. The notes index keeps, per word, only which notes hold it
# (no positions, frequencies or field flags: under half the memory of the index with them);
# the digests index, over the digests alone, is what ranks a digest match above a body-only
# match, which without field flags the notes index cannot tell apart. Each field is indexed
# under its long name (``AS``), so a query says ``@digest:`` whatever the note hash calls it
# (_field_names.py).
SCHEMA: tuple[Field, ...] = (
    TagField(FIELD.ws, as_name="ws"),
    TagField(FIELD.topic, as_name="topic"),
    TagField(FIELD.kind, as_name="kind"),
    TextField(FIELD.digest, as_name="digest"),
    TextField(FIELD.body, as_name="body"),
    # The searchable head of an offloaded body (see _writes.SEARCH_TEXT_BYTES).
    TextField(FIELD.stext, as_name="stext"),
    # Not SORTABLE: the retention sweep sorts a batch by it, which RediSearch does from the
    # documents; a sort vector in the index cost every note about 20 bytes.
    NumericField(FIELD.updated, as_name="updated"),
    # The workspace's sequence number of the note's last write: a search looks first among
    # the notes of the last writes (store/search/_search.py), so that a common word costs
    # what those hold, not what the whole board holds.
    NumericField(FIELD.seq, as_name="seq"),
)
DIGEST_SCHEMA: tuple[Field, ...] = (
    TagField(FIELD.ws, as_name="ws"),
    TagField(FIELD.topic, as_name="topic"),
    TextField(FIELD.digest, as_name="digest"),
    NumericField(FIELD.seq, as_name="seq"),
)


async def ensure_index(client: RedisCommands, name: str = keys.INDEX_NAME) -> bool:
    """Create the notes index ``name`` and its digests index unless they exist.

    Returns True when either was created now.
    """
    created = False
    for index, schema in ((name, SCHEMA), (keys.digest_index(name), DIGEST_SCHEMA)):
        if await _create(client, index, schema):
            log.info("created search index %s", index)
            created = True
    return created


async def _create(client: RedisCommands, name: str, schema: tuple[Field, ...]) -> bool:
    async with client.operation():
        try:
            await client.redis.ft(name).info()  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            return False
        except ResponseError as exc:
            if "no such index" not in str(exc).lower() and "unknown index" not in str(exc).lower():
                raise
        try:
            await client.redis.ft(name).create_index(
                list(schema),
                definition=IndexDefinition(prefix=[keys.NOTE_PREFIX], index_type=IndexType.HASH),  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
                # NOOFFSETS: no term positions. They serve exact phrases, SLOP/INORDER and
                # highlighting, none of which search_keys asks for (it ORs single words).
                no_term_offsets=True,
                # NOFREQS: a word counts once per note however often it occurs in it.
                no_term_frequencies=True,
                # NOFIELDS: no record of which field held a word; the digests index has one
                # text field, and the notes index is not asked about fields.
                no_field_flags=True,
                # Notes are small summaries; stop-word removal would make "the plan" match
                # everything with "plan" and nothing else, which is what we want anyway,
                # so keep RediSearch's defaults.
            )
        except ResponseError as exc:
            # Another gateway process won the race to create it.
            if "already exists" not in str(exc).lower():
                raise
            return False
    return True


async def retire_old_indexes(client: RedisCommands, index: str = keys.INDEX_NAME) -> list[str]:
    """Drop the indexes of earlier versions (their notes stay); returns the names dropped.

    ``index`` is this version's index on that Redis: a cluster primary's carries a hash tag,
    and so did the earlier versions' indexes there.

    A gateway of the earlier version still running during a rolling upgrade recreates its
    index on its next search; the next start of a gateway of this version drops it again.
    """
    dropped = []
    tag = index.removeprefix(keys.INDEX_NAME)
    async with client.operation():
        for name in (retired + tag for retired in keys.RETIRED_INDEX_NAMES):
            try:
                # Without DD: the documents are the notes this version's index covers too.
                await client.redis.execute_command("FT.DROPINDEX", name)  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            except ResponseError as exc:
                message = str(exc).lower()
                if "unknown index" not in message and "no such index" not in message:
                    raise
                continue
            dropped.append(name)
            log.info("dropped the retired search index %s (its notes are kept)", name)
    return dropped


async def index_ready(client: RedisCommands, name: str = keys.INDEX_NAME) -> bool:
    """True when the notes index and its digests index exist and have finished their scans."""
    for index in (name, keys.digest_index(name)):
        async with client.operation():
            try:
                info = await client.redis.ft(index).info()  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            except ResponseError:
                return False
        if str(info.get("indexing", 0)) not in ("0", "0.0", "b'0'"):
            return False
    return True


async def wait_until_indexed(
    client: RedisCommands, *, timeout: float, name: str = keys.INDEX_NAME
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
