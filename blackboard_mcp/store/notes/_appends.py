"""update_state with ``append``: the note extended where it lies, in one atomic script.

An append takes no ``expect_version``, so it has nothing to conflict on: it must not read
the note, rewrite it whole and lose a WATCH race to the next appender. One Lua script reads
the note's few fields, extends its content in place, and commits (version, sequence number,
change log, listings) in the same step, so concurrent appends to one note are all kept, in
the order Redis runs them, and none is refused.

Where the content lives decides what an append costs:

- an inline body (up to ``offload_bytes``) is rewritten in the hash: bounded by that size;
- past it, the content moves once into the note's own *log blob*, a key named ``log-<id>``
  (unique per lifetime, never shared) that later appends extend with APPEND: O(appended
  bytes) whatever the note's size;
- a note whose content is a shared, content-addressed blob (a large body written whole) is
  copied once into a log blob of its own, its reference to the shared one dropped.

The search text of an offloaded note (its first SEARCH_TEXT_BYTES) grows with it until full.
The stored token count grows by the appended text's own count: an estimate, since the BPE
may merge tokens across the seam (off by a token or so per append, either way), made exact
again by the next whole write. Reads stay exact: they plan with the stored count and count
what they send (``spent_tokens``).

A log blob only grows while its name lives, so a reader that fetched the note's fields and
then its blob reads it up to the ``size`` it saw (GETRANGE), which is that version's content.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from .._errors import Contended, InvalidArgument, NotFound, TooLarge, Unconfirmed
from ..connection import _key_names as keys
from ..connection._board_client import BoardClient
from ..connection._field_names import FIELD, lua
from ..connection._tx import Gate
from ._addresses import SCHEME
from ._history import KEEP_VERSION_LUA
from ._notes import NoteWrite
from ._tokencount import TokenCounter, count_as_json_string_off_loop
from ._writes import SEARCH_TEXT_BYTES, WriteLimits, WriteResult

LOG_BLOB_PREFIX = "log-"

# KEYS: 1 note, 2 sequence, 3 change log, 4 by_name, 5 by_version, 6 topics, 7 blob refs,
#       8 by_kind text, 9 by_kind summary, 10 the blob the caller saw (or any key of the
#       slot), 11 a new log blob (used only if the content moves into one), 12 the note's
#       kept versions (store/notes/_history.py), 13 the workspace's kept versions by time,
#       14 its retention policy
# ARGV: 1 text, 2 max body bytes, 3 offload bytes, 4 search text bytes, 5 path,
#       6 change log maxlen, 7 uri, 8 author, 9 digest, 10 digest tokens, 11 text tokens,
#       12 sources json, 13 confidence, 14 sources given, 15 confidence given,
#       16 the blob name the caller saw, 17 the new log blob's name, 18 workspace, 19 topic,
#       20 the kept versions' key prefix, 21 the blobs' key prefix, 22 versions kept,
#       23 their maximum age in seconds (the board's; the policy may say otherwise),
#       24 the notes' key prefix, 25... the sources' members (each must exist; its version is
#       recorded: store/notes/_provenance.py)
# Returns {version, seq}; {-1} for a table; {-2, size} over the limit; {-3, blob} when the
# note's blob is not the one the caller saw (read it, declare it, call again); {-4, member}
# for a source that does not exist.
_APPEND = KEEP_VERSION_LUA + lua(
    """
local note = KEYS[1]
-- Sources first, before anything is written. Their keys are not declared: each carries the
-- workspace's hash tag, so it is in the declared keys' slot.
local source_at = {}
for i = 25, #ARGV do
  local v = redis.call('HGET', ARGV[24] .. ARGV[i], $version)
  if not v then return {-4, ARGV[i]} end
  source_at[#source_at + 1] = v
end
local old = redis.call('HMGET', note, $version, $kind, $blob, $size, $body_tokens)
-- The search text is read only while it can still grow (reading a full one costs its size).
if redis.call('HSTRLEN', note, $stext) < tonumber(ARGV[4]) then
  old[6] = redis.call('HGET', note, $stext)
end
local version = tonumber(old[1]) or 0
local kind = 'text'
if version > 0 and old[2] then kind = old[2] end
if kind == 'table' then return {-1} end
local blob = old[3] or ''
if blob ~= ARGV[16] then return {-3, blob} end
local text = ARGV[1]
local size = (tonumber(old[4]) or 0) + #text
if size > tonumber(ARGV[2]) then return {-2, size} end
-- Nothing is refused past here: keep the version this append replaces (its blob's
-- reference goes with the copy, so the note may drop its own below), then extend.
keep_version(note, KEYS[12], KEYS[7], KEYS[13], KEYS[14], ARGV[20], ARGV[21],
  ARGV[19] .. '/' .. ARGV[5], ARGV[19], tonumber(ARGV[22]), tonumber(ARGV[23]))

local fields = {}
local function put(name, value)
  fields[#fields + 1] = name
  fields[#fields + 1] = value
end
-- The first ARGV[4] bytes of head .. more, never ending inside a UTF-8 character; nil when
-- that is head itself (full already: the field is left as it is, not rewritten).
local function search_text(head, more)
  local room = tonumber(ARGV[4]) - #head
  if room <= 0 then return nil end
  if #more <= room then return head .. more end
  local cut = room
  while cut > 0 do
    local b = string.byte(more, cut + 1)
    if b < 128 or b >= 192 then break end
    cut = cut - 1
  end
  if cut == 0 then return nil end
  return head .. string.sub(more, 1, cut)
end
local function put_search_text(head, more)
  local text = search_text(head, more)
  if text then put($stext, text) end
end

if string.sub(blob, 1, 4) == 'log-' then
  redis.call('APPEND', KEYS[10], text)
  if old[6] then put_search_text(old[6], text) end
elseif blob ~= '' then
  local shared = redis.call('GET', KEYS[10]) or ''
  redis.call('SET', KEYS[11], shared .. text)
  redis.call('HSET', KEYS[7], ARGV[17], 1)
  if tonumber(redis.call('HINCRBY', KEYS[7], blob, -1)) <= 0 then
    redis.call('DEL', KEYS[10])
    redis.call('HDEL', KEYS[7], blob)
  end
  put($blob, ARGV[17])
  if old[6] then put_search_text(old[6], text) end
else
  local body = ''
  if version > 0 then body = redis.call('HGET', note, $body) or '' end
  if size > tonumber(ARGV[3]) then
    local content = body .. text
    redis.call('SET', KEYS[11], content)
    redis.call('HSET', KEYS[7], ARGV[17], 1)
    put($body, '')
    put($blob, ARGV[17])
    put_search_text('', content)
  else
    put($body, body .. text)
    put($blob, '')
    put($stext, '')
  end
end

version = version + 1
local body_tokens = (tonumber(old[5]) or 0) + tonumber(ARGV[11])
put($version, version)
put($size, size)
put($kind, kind)
put($digest, ARGV[9])
put($author, ARGV[8])
put($digest_tokens, ARGV[10])
put($body_tokens, body_tokens)
put($est_tokens, tonumber(ARGV[10]) + body_tokens)
if version == 1 then
  put($ws, ARGV[18])
  put($topic, ARGV[19])
  put($columns, '')
  put($nrows, 0)
  put($origin, '')
  if ARGV[14] ~= '1' then put($sources, '[]') end
  if ARGV[15] ~= '1' then put($confidence, '') end
end
if ARGV[14] == '1' then
  put($sources, ARGV[12])
  put($source_at, '[' .. table.concat(source_at, ',') .. ']')
end
if ARGV[15] == '1' then put($confidence, ARGV[13]) end

local seq = redis.call('INCR', KEYS[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
put($seq, seq)
put($updated, now)
if version == 1 then put($created, now) end
redis.call('HSET', note, unpack(fields))
local by_kind = KEYS[8]
if kind == 'summary' then by_kind = KEYS[9] end
redis.call('ZADD', by_kind, seq, ARGV[5])
redis.call('SADD', KEYS[6], ARGV[19])
redis.call('ZADD', KEYS[4], 0, ARGV[5])
redis.call('ZADD', KEYS[5], version, ARGV[5])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*',
  'seq', seq, 'op', 'append', 'uri', ARGV[7], 'version', version, 'author', ARGV[8],
  'at', now)
return {version, seq}
"""
)


async def append_note(
    client: BoardClient,
    write: NoteWrite,
    *,
    counter: TokenCounter,
    limits: WriteLimits,
    may_read: bool,
    gate: Gate | None,
) -> WriteResult:
    """Extend ``write.address``'s note by ``write.append`` (creating it when missing)."""
    assert write.append is not None
    address = write.address
    ws, member, topic = address.workspace, address.member, address.topic
    note_key = keys.note(ws, member)
    # First round trip: the note's blob name (the script must be told which key it may
    # extend) and the gate, judged before anything is written.
    first: list[tuple[Any, ...]] = [("HGET", note_key, FIELD.blob)]
    if gate is not None:
        first.append(gate.command)
    async with client.operation():
        replies = await client.round_trip(first)
    if gate is not None:
        gate.judge(replies[1])
    seen = (replies[0] or b"").decode()
    sources = orjson.dumps([s.uri for s in write.sources]).decode()
    confidence = "" if write.confidence is None else repr(write.confidence)
    append_tokens = await count_as_json_string_off_loop(counter, write.append)
    fixed_args = [
        write.append,
        limits.max_body_bytes,
        limits.offload_bytes,
        SEARCH_TEXT_BYTES,
        address.path,
        limits.changelog_maxlen,
        address.uri,
        write.author,
        write.digest,
        counter.count(write.digest),
        append_tokens,
        sources,
        confidence,
        "1" if write.sources else "0",
        "1" if write.confidence is not None else "0",
    ]
    new_log = LOG_BLOB_PREFIX + uuid.uuid4().hex
    # The note's blob changes between the two round trips only when the note is rewritten
    # whole or moves into a log blob meanwhile: a retry is rare, two in a row rarer still.
    for _ in range(limits.max_retries + 1):
        commands: list[tuple[Any, ...]] = [
            (
                "EVAL",
                _APPEND,
                14,
                note_key,
                keys.sequence(ws),
                keys.changelog(ws),
                keys.by_name(ws, topic),
                keys.by_version(ws, topic),
                keys.topics(ws),
                keys.blob_refs(ws),
                keys.by_kind(ws, topic, "text"),
                keys.by_kind(ws, topic, "summary"),
                keys.blob(ws, seen or new_log),
                keys.blob(ws, new_log),
                keys.versions(ws, member),
                keys.version_times(ws),
                keys.retention(ws),
                *fixed_args,
                seen,
                new_log,
                ws,
                topic,
                keys.version(ws, member, ""),
                keys.blob(ws, ""),
                limits.history.versions,
                limits.history.max_age_ms // 1000,
                keys.note(ws, ""),
                *(source.member for source in write.sources),
            )
        ]
        if limits.wait is not None:
            commands.append(("WAIT", limits.wait.replicas, limits.wait.timeout_ms))
        async with client.operation():
            # An append is not idempotent: never sent twice (store/connection/_pool.py).
            replies = await client.round_trip(commands, repeatable=False)
        outcome = replies[0]
        code = int(outcome[0])
        if code == -3:
            seen = outcome[1].decode()
            continue
        if code == -4:
            missing = f"{SCHEME}{ws}/{outcome[1].decode()}"
            raise NotFound(f"no note at {missing}", uris=[missing])
        if code == -1:
            raise InvalidArgument(
                "append extends text notes; rewrite a table with columns+rows"
                if may_read
                else "append cannot extend this note; rewrite it whole",
                argument="append",
            )
        if code == -2:
            raise TooLarge(
                f"the appended body would be {int(outcome[1])} bytes; the limit is "
                f"{limits.max_body_bytes}"
                if may_read
                else f"the appended body would be over the limit of {limits.max_body_bytes} bytes",
                argument="append",
                hint="start a new note and link it with link_state(rel='part_of')",
            )
        if limits.wait is not None:
            acked = int(replies[1])
            if acked < limits.wait.replicas:
                raise Unconfirmed(
                    f"the write committed on the primary but reached {acked} of "
                    f"{limits.wait.replicas} replicas within {limits.wait.timeout_ms} ms"
                )
        return {"version": code, "digest": write.digest, "warnings": list(write.warnings)}
    raise Contended(
        f"the note was rewritten whole during each of {limits.max_retries + 1} attempts to "
        "append to it"
    )
