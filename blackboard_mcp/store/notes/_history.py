"""Note history: every write keeps the version it replaces.

Before a write (a whole write or an append) changes a note, the note's hash is copied
whole, server-side, to ``bbh:{ws}:<member>@<version>`` (``keys.version``), its search text
left out, and the version is added to the note's sorted set of kept versions
(``keys.versions``). The copy is immutable: nothing writes it again. The current version is
the note itself and is never in the set, so a bound can never drop it.

Content is not copied twice. A body up to the offload size lives in the hash and is copied
with it. A larger body lives in a blob the copy names, and the copy holds a reference to it
in the workspace's blob reference counts: a content-addressed blob outlives the note's move
to other content as long as a kept version names it. An appended note's log blob only ever
grows (store/notes/_appends.py), so every kept version of a log names the same blob and
reads its first ``size`` bytes: a log built by 10,000 appends keeps one blob and at most
``versions`` small hashes of fields, never 10,000 copies of its text.

Bounds, applied by the same script at every write of the note, oldest version first: at
most ``versions`` kept per note (0: history off, and what was kept is dropped at the next
write), and none written more than ``max_age_ms`` ago (0: no age bound). Deleting a note
(store/lifecycle/_delete.py) drops its history with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..connection import _keys as keys


@dataclass(frozen=True)
class HistoryLimits:
    """How much of each note's history a board keeps."""

    versions: int = 50
    max_age_ms: int = 30 * 24 * 3600 * 1000


# keep_version(note, versions, refs, version prefix, blob prefix, keep, max age ms):
# copies the note (if it exists and history is on) and applies the bounds. Shared by the
# whole write's script below and the append script, which runs it before changing the note.
KEEP_VERSION_LUA = """
local function drop_version(versions, refs, p_version, p_blob, ver)
  local kept = p_version .. ver
  local blob = redis.call('HGET', kept, 'blob')
  if blob and blob ~= '' then
    if tonumber(redis.call('HINCRBY', refs, blob, -1)) <= 0 then
      redis.call('HDEL', refs, blob)
      redis.call('DEL', p_blob .. blob)
    end
  end
  redis.call('DEL', kept)
  redis.call('ZREM', versions, ver)
end
local function keep_version(note, versions, refs, p_version, p_blob, keep, max_age_ms)
  local current = redis.call('HMGET', note, 'version', 'blob')
  if keep > 0 and current[1] then
    local kept = p_version .. current[1]
    redis.call('COPY', note, kept, 'REPLACE')
    redis.call('HDEL', kept, 'stext')
    redis.call('ZADD', versions, current[1], current[1])
    if current[2] and current[2] ~= '' then redis.call('HINCRBY', refs, current[2], 1) end
  end
  local cutoff = nil
  if max_age_ms > 0 then
    local t = redis.call('TIME')
    cutoff = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - max_age_ms
  end
  local count = redis.call('ZCARD', versions)
  while count > 0 do
    local oldest = redis.call('ZRANGE', versions, 0, 0)[1]
    local drop = count > keep
    if not drop and cutoff then
      drop = tonumber(redis.call('HGET', p_version .. oldest, 'updated') or 0) < cutoff
    end
    if not drop then break end
    drop_version(versions, refs, p_version, p_blob, oldest)
    count = count - 1
  end
end
"""

# KEYS: 1 note, 2 its versions, 3 blob refs. ARGV: 1 version prefix, 2 blob prefix,
# 3 versions kept, 4 max age in ms.
KEEP_VERSION = (
    KEEP_VERSION_LUA
    + """
keep_version(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
return 1
"""
)


def keep_version_command(
    workspace: str, member: str, limits: HistoryLimits
) -> tuple[str | int, ...]:
    """The command a whole write queues, before it changes the note, to keep its version."""
    return (
        "EVAL",
        KEEP_VERSION,
        3,
        keys.note(workspace, member),
        keys.versions(workspace, member),
        keys.blob_refs(workspace),
        keys.version(workspace, member, ""),
        keys.blob(workspace, ""),
        limits.versions,
        limits.max_age_ms,
    )
