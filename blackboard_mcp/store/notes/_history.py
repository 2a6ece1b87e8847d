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

from ..connection._field_names import lua

# The most past versions a note may keep: a delete drops a note's versions in the script
# that deletes it (store/lifecycle/_delete.py), a batch of notes at a time, and that script
# must stay short.
MAX_HISTORY_VERSIONS = 1000
# A write drops at most this many versions past its bounds (the rest go at later writes):
# lowering a bound must not make one write's script walk a thousand versions.
DROPS_PER_WRITE = 100


@dataclass(frozen=True)
class HistoryLimits:
    """How much of each note's history a board keeps."""

    versions: int = 50
    max_age_ms: int = 30 * 24 * 3600 * 1000


# The Lua both write paths run. drop_version removes one kept version (and its blob's
# reference); keep_version copies the note (if it exists and history is on for its topic)
# and then applies the topic's bounds. A bound is the topic's override in the workspace's
# policy hash (``versions:<topic>``, ``version-age:<topic>``, seconds), else the
# workspace's (``versions:*``, ``version-age:*``), else the board's (the arguments).
# ``times`` orders every kept version of the workspace by its write time, for the sweep.
KEEP_VERSION_LUA = f"local DROPS_PER_WRITE = {DROPS_PER_WRITE}\n" + lua(
    """
local function history_bound(policy, prefix, topic, default)
  local set = redis.call('HMGET', policy, prefix .. topic, prefix .. '*')
  return tonumber(set[1] or set[2] or default)
end
local function drop_version(versions, refs, times, p_version, p_blob, member, ver)
  local kept = p_version .. ver
  local blob = redis.call('HGET', kept, $blob)
  if blob and blob ~= '' then
    if tonumber(redis.call('HINCRBY', refs, blob, -1)) <= 0 then
      redis.call('HDEL', refs, blob)
      redis.call('DEL', p_blob .. blob)
    end
  end
  redis.call('DEL', kept)
  redis.call('ZREM', versions, ver)
  redis.call('ZREM', times, member .. '@' .. ver)
end
local function keep_version(note, versions, refs, times, policy, p_version, p_blob, member,
                            topic, default_keep, default_age)
  local keep = history_bound(policy, 'versions:', topic, default_keep)
  local max_age_ms = history_bound(policy, 'version-age:', topic, default_age) * 1000
  local current = redis.call('HMGET', note, $version, $blob, $updated)
  if keep > 0 and current[1] then
    local kept = p_version .. current[1]
    redis.call('COPY', note, kept, 'REPLACE')
    redis.call('HDEL', kept, $stext)
    redis.call('ZADD', versions, current[1], current[1])
    redis.call('ZADD', times, tonumber(current[3] or 0), member .. '@' .. current[1])
    if current[2] and current[2] ~= '' then redis.call('HINCRBY', refs, current[2], 1) end
  end
  local cutoff = nil
  if max_age_ms > 0 then
    local t = redis.call('TIME')
    cutoff = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - max_age_ms
  end
  local count = redis.call('ZCARD', versions)
  local drops = 0
  while count > 0 and drops < DROPS_PER_WRITE do
    local oldest = redis.call('ZRANGE', versions, 0, 0)[1]
    local drop = count > keep
    if not drop and cutoff then
      drop = tonumber(redis.call('HGET', p_version .. oldest, $updated) or 0) < cutoff
    end
    if not drop then break end
    drop_version(versions, refs, times, p_version, p_blob, member, oldest)
    count = count - 1
    drops = drops + 1
  end
end
"""
)

# Drops every kept version of a workspace written before its topic's maximum age, oldest
# first, at most ARGV[5] of them; the sweep (store/lifecycle/_retention.py) runs it.
# KEYS: 1 the workspace's kept versions by time, 2 blob refs, 3 its policy. ARGV: 1 the
# kept versions' key prefix (a member and @N complete it), 2 their sets' prefix, 3 the blob
# prefix, 4 the board's max age in seconds, 5 the most to look at, 6 now in ms, 7 the
# oldest write time any bound can expire (ms).
EXPIRE_VERSIONS = (
    KEEP_VERSION_LUA
    + """
local looked, dropped = 0, 0
local candidates = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[7], 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[5]))
for i = 1, #candidates, 2 do
  local name, written = candidates[i], tonumber(candidates[i + 1])
  local at = string.find(name, '@', 1, true)
  local member, ver = string.sub(name, 1, at - 1), string.sub(name, at + 1)
  local topic = string.sub(member, 1, string.find(member, '/', 1, true) - 1)
  local age = history_bound(KEYS[3], 'version-age:', topic, ARGV[4])
  if age > 0 and written < tonumber(ARGV[6]) - age * 1000 then
    drop_version(ARGV[2] .. member, KEYS[2], KEYS[1], ARGV[1] .. member .. '@', ARGV[3],
      member, ver)
    dropped = dropped + 1
  end
end
return {dropped, #candidates / 2}
"""
)
