"""Notes stored under the field names of earlier versions, renamed once at start.

Earlier versions spelt each field of a note hash out (``version``, ``digest_tokens``) and
kept the note's address in it (``uri``); this one stores the short names of _field_names.py
and no address. A start that finds the board not yet marked as converted renames the fields
of every note and every kept version, a batch of keys of one workspace per script (each key
whole, atomically), then marks the board. Converting is idempotent: a key already in this
layout is left as it is, so gateways that start together each run it safely.

Earlier versions must be stopped before this one starts: a gateway of an earlier version
that writes after the conversion stores fields this one does not read (docs/operations.md,
"Upgrading the stored format").

A gateway converts at start, and a note call that comes before it is done is refused
``unavailable`` (``FieldLayout``). The CLI does not convert: run the CLI of the release the
gateways run.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from typing import Literal, NoReturn

from .._errors import Unavailable
from . import _key_names as keys
from ._board_client import RedisCommands
from ._field_names import DROPPED_LONG_NAMES, FORMAT_VERSION, STORED_NAMES

log = logging.getLogger(__name__)

# Keys per script call, and per SCAN step.
_BATCH = 200

# KEYS: hashes of one workspace. ARGV: the long and stored name of each field in pairs, then
# '', then the long names dropped. A hash holding ``version`` is in the earlier layout: its
# fields are written under their stored names first and the long ones removed after, so the
# key never empties (which would drop it from the search index in between).
_CONVERT = """
local renamed, dropped = {}, {}
local i = 1
while ARGV[i] ~= '' do
  renamed[ARGV[i]] = ARGV[i + 1]
  i = i + 2
end
for j = i + 1, #ARGV do dropped[ARGV[j]] = true end
local converted = 0
for _, key in ipairs(KEYS) do
  if redis.call('HEXISTS', key, 'version') == 1 then
    local flat = redis.call('HGETALL', key)
    local new, old = {}, {}
    for f = 1, #flat, 2 do
      local name = flat[f]
      local stored = renamed[name]
      if stored then
        new[#new + 1] = stored
        new[#new + 1] = flat[f + 1]
        old[#old + 1] = name
      elseif dropped[name] then
        old[#old + 1] = name
      end
    end
    if #new > 0 then redis.call('HSET', key, unpack(new)) end
    if #old > 0 then redis.call('HDEL', key, unpack(old)) end
    converted = converted + 1
  end
end
return converted
"""

_CONVERT_ARGS: tuple[str, ...] = (
    *(name for pair in STORED_NAMES.items() for name in pair),
    "",
    *DROPPED_LONG_NAMES,
)

# A note's or kept version's key: its workspace is the hash tag.
_TAG = re.compile(rb"\{([^}]*)\}")


async def convert_field_layout(client: RedisCommands) -> int:
    """Rename the fields of every note and kept version stored in the earlier layout, unless
    the board is marked as converted, and mark it; returns how many keys were converted."""
    async with client.operation():
        if (await client.redis.get(keys.field_layout())) == FORMAT_VERSION.encode():
            return 0
    converted = looked_at = 0
    for prefix in (keys.NOTE_PREFIX, keys.VERSION_PREFIX):
        async for batch in _batches(client, prefix):
            looked_at += len(batch)
            async with client.operation():
                converted += int(
                    await client.redis.eval(_CONVERT, len(batch), *batch, *_CONVERT_ARGS)  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
                )
    if looked_at:
        # An empty board is left unmarked (a start writes nothing to it); its first start
        # with notes looks at them once.
        async with client.operation():
            await client.redis.set(keys.field_layout(), FORMAT_VERSION)
    if converted:
        log.info("renamed the fields of %d notes and kept versions to this layout", converted)
    return converted


async def _batches(client: RedisCommands, prefix: str) -> AsyncIterator[list[bytes]]:
    """The keys under ``prefix``, in batches of one workspace each (one hash slot)."""
    pending: dict[bytes, list[bytes]] = {}
    names = client.redis.scan_iter(match=f"{prefix}*", count=1000, _type="HASH").__aiter__()
    while True:
        # One deadline per step, not for the whole walk: a board may hold millions of keys.
        async with client.operation():
            try:
                name = await anext(names)
            except StopAsyncIteration:
                break
        tag = _TAG.search(name)
        if tag is None:
            continue  # not a key this board wrote
        group = pending.setdefault(tag.group(1), [])
        group.append(name)
        if len(group) == _BATCH:
            yield group
            pending[tag.group(1)] = []
    for group in pending.values():
        if group:
            yield group


class FieldLayout:
    """Whether this process may read and write notes.

    A start requires the board converted (``starting``, then ``ensure``): until it is, calls
    are refused ``unavailable``, and a start that failed before it was done is tried again
    in the background at the next call. A board no start has prepared (one the CLI opened)
    is taken as it is."""

    def __init__(self, client: RedisCommands) -> None:
        self._client = client
        self._state: Literal["unchecked", "required", "converted"] = "unchecked"
        self._lock = asyncio.Lock()
        self._retry: asyncio.Task[None] | None = None

    @property
    def refuses_calls(self) -> bool:
        return self._state == "required"

    @property
    def converted(self) -> bool:
        return self._state == "converted"

    @property
    def converting(self) -> bool:
        """This process is converting the board now."""
        return self._lock.locked()

    def starting(self) -> None:
        """A start has begun (called before its first await): calls wait for its conversion."""
        if self._state != "converted":
            self._state = "required"

    async def ensure(self) -> None:
        """Convert the board unless this process has seen it converted."""
        if self.converted:
            return
        async with self._lock:
            # Another task may have converted while this one waited for the lock.
            if not self.converted:
                await convert_field_layout(self._client)
                self._state = "converted"

    def refuse(self) -> NoReturn:
        """Refuse a call that came before the start's conversion was done."""
        if not self._lock.locked() and (self._retry is None or self._retry.done()):
            # The start failed before it was done (Redis was away, say): try again.
            self._retry = asyncio.create_task(self._try_again())
        raise Unavailable(
            "the board is renaming its notes' fields to this release's layout (the first "
            "start after an upgrade)",
            hint="retry in a minute; the gateway's /readyz answers 200 once it is done",
        )

    async def _try_again(self) -> None:
        try:
            await self.ensure()
        except Exception as exc:  # the next refused call tries again; the reason goes to the log
            log.warning("renaming the board's note fields failed again: %s", exc)
