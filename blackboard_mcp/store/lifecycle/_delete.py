"""Deleting notes: the note, its indexes, its links at both ends, its blob and its search entry.

Each note goes in one server-side script, so a delete is atomic per note: a write to the same
note commits wholly before it (and is deleted with it) or wholly after it (a new note, version
1, kept whole). A write's transaction WATCHes the note's key, which the script deletes, so a
write that read the note before the delete retries and does not resurrect half of it.

The script finds the keys of a note's links' other ends as it goes. They are not declared to
Redis, but every one of them carries the workspace's hash tag, so it is always in the slot of
the declared keys (Redis Cluster serves them from the same node).

Every deleted note takes the workspace's next sequence number, as a write does: the change log
gets a ``delete`` entry with it, and the deleted-notes set records it, so a reader following a
``cursor`` is told what was deleted since (see _reads.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .._errors import InvalidArgument, NotFound
from ..connection import _key_names as keys
from ..connection._board_client import RedisCommands
from ..connection._field_names import lua
from ..notes._addresses import SCHEME, parse_address, validate_name

# Notes per script call: long enough to amortise the round trip, short enough that one
# call never holds Redis for long (each note costs a few commands, plus one per link).
BATCH = 100
# How many deleted addresses a report names; the count is always exact.
REPORTED = 100

_SCRIPT = lua(
    """
local refs, seqkey, log, gone, topics = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local p_note, p_out, p_in = ARGV[1], ARGV[2], ARGV[3]
local p_recent, p_name, p_version, p_kind, p_blob = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local maxlen, author, keep, uri_prefix = ARGV[9], ARGV[10], tonumber(ARGV[11]), ARGV[12]
local cutoff = tonumber(ARGV[13])
local p_kept, p_kept_set, kept_times = ARGV[14], ARGV[15], ARGV[16]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deleted = {}
local touched = {}
local p_at = ARGV[17]
-- Each link's other end forgets it: its set, and for a link into this note the version
-- record the other end keeps of it (store/notes/_provenance.py).
local function unlink(set, prefix, member, records)
  for _, link in ipairs(redis.call('SMEMBERS', set)) do
    local tab = string.find(link, '\\t', 1, true)
    local other = string.sub(link, tab + 1)
    redis.call('SREM', prefix .. other, string.sub(link, 1, tab) .. member)
    if records then redis.call('HDEL', p_at .. other, string.sub(link, 1, tab) .. member) end
  end
end
-- A note's kept versions go with it, and each one's reference to its blob.
local function forget_versions(member)
  local set = p_kept_set .. member
  for _, ver in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    local kept = p_kept .. member .. '@' .. ver
    local blob = redis.call('HGET', kept, $blob)
    if blob and blob ~= '' and redis.call('HINCRBY', refs, blob, -1) <= 0 then
      redis.call('HDEL', refs, blob)
      redis.call('DEL', p_blob .. blob)
    end
    redis.call('DEL', kept)
    redis.call('ZREM', kept_times, member .. '@' .. ver)
  end
  redis.call('DEL', set)
end
for i = 18, #ARGV do
  local member = ARGV[i]
  local note = p_note .. member
  local f = redis.call('HMGET', note, $topic, $kind, $blob, $version, $updated)
  -- A retention sweep passes a cutoff: a note written again since it looked is kept.
  if f[4] and (cutoff == nil or tonumber(f[5] or 0) < cutoff) then
    local topic = f[1]
    local path = string.sub(member, #topic + 2)
    unlink(p_out .. member, p_in, member, false)
    unlink(p_in .. member, p_out, member, true)
    redis.call('DEL', note, p_out .. member, p_in .. member, p_at .. member)
    forget_versions(member)
    redis.call('ZREM', p_recent .. topic, path)
    redis.call('ZREM', p_name .. topic, path)
    redis.call('ZREM', p_version .. topic, path)
    if f[2] then redis.call('ZREM', p_kind .. topic .. ':' .. f[2], path) end
    if f[3] and f[3] ~= '' then
      if redis.call('HINCRBY', refs, f[3], -1) <= 0 then
        redis.call('HDEL', refs, f[3])
        redis.call('DEL', p_blob .. f[3])
      end
    end
    local seq = redis.call('INCR', seqkey)
    redis.call('ZADD', gone, seq, member)
    redis.call('XADD', log, 'MAXLEN', '~', maxlen, '*', 'seq', seq, 'op', 'delete',
      'uri', uri_prefix .. member, 'version', f[4], 'author', author, 'at', now)
    deleted[#deleted + 1] = member
    touched[topic] = true
  elseif not f[4] and cutoff == nil then
    -- Listed but not there (written by hand, say): drop the stale index entries, so that
    -- a topic's delete ends.
    local slash = string.find(member, '/', 1, true)
    local topic, path = string.sub(member, 1, slash - 1), string.sub(member, slash + 1)
    redis.call('ZREM', p_recent .. topic, path)
    redis.call('ZREM', p_name .. topic, path)
    redis.call('ZREM', p_version .. topic, path)
    forget_versions(member)
    touched[topic] = true
  end
end
for topic, _ in pairs(touched) do
  if redis.call('ZCARD', p_name .. topic) == 0 then
    redis.call('SREM', topics, topic)
  end
end
if #deleted > 0 and redis.call('ZCARD', gone) > keep then
  redis.call('ZREMRANGEBYRANK', gone, 0, -keep - 1)
end
return deleted
"""
)


@dataclass(frozen=True)
class Target:
    """What a delete removes: one note, one topic, or (neither given) the whole workspace."""

    workspace: str
    topic: str | None = None
    member: str | None = None

    @property
    def label(self) -> str:
        if self.member is not None:
            return f"{SCHEME}{self.workspace}/{self.member}"
        if self.topic is not None:
            return f"{SCHEME}{self.workspace}/{self.topic}/"
        return f"{SCHEME}{self.workspace}/"


def delete_target(workspace: str, *, topic: str | None = None, uri: str | None = None) -> Target:
    """The target named by a workspace and at most one of a topic or a note's address,
    each name checked (a caller's string may be any text)."""
    ws = validate_name(workspace, "workspace")
    if topic is not None and uri is not None:
        raise InvalidArgument("give a topic or a uri, not both", argument="uri")
    if uri is not None:
        address = parse_address(uri).require_note("uri")
        if address.workspace != ws:
            raise InvalidArgument(f"{address.uri} is not in workspace {ws}", argument="uri")
        return Target(ws, address.topic, address.member)
    if topic is not None:
        return Target(ws, validate_name(topic, "topic"))
    return Target(ws)


@dataclass
class DeleteReport:
    """How many notes went (or would go), with the first REPORTED of their addresses."""

    target: str
    count: int = 0
    uris: list[str] = field(default_factory=list)

    def add(self, workspace: str, members: Sequence[str]) -> None:
        self.count += len(members)
        room = REPORTED - len(self.uris)
        self.uris.extend(f"{SCHEME}{workspace}/{m}" for m in members[:room])


async def _topics(client: RedisCommands, target: Target) -> list[str]:
    if target.topic is not None:
        return [target.topic]
    return sorted(t.decode() for t in await client.redis.smembers(keys.topics(target.workspace)))


async def plan_delete(client: RedisCommands, target: Target) -> DeleteReport:
    """What a delete of ``target`` would remove now, removing nothing."""
    report = DeleteReport(target.label)
    ws = target.workspace
    async with client.operation():
        if target.member is not None:
            if await client.redis.exists(keys.note(ws, target.member)):
                report.add(ws, [target.member])
            return report
        for topic in await _topics(client, target):
            paths = await client.redis.zrange(keys.by_name(ws, topic), 0, -1)
            report.add(ws, [f"{topic}/{p.decode()}" for p in paths])
    return report


async def delete_members(
    client: RedisCommands,
    workspace: str,
    members: Sequence[str],
    *,
    author: str,
    changelog_maxlen: int,
    written_before_ms: int | None = None,
) -> list[str]:
    """Delete these notes of ``workspace`` (those that exist); returns the members deleted.

    With ``written_before_ms``, only notes whose last write is older than that are deleted.
    """
    if not members:
        return []
    prefixes = keys.member_prefixes(workspace)
    async with client.operation():
        deleted = await client.redis.eval(  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            _SCRIPT,
            5,
            keys.blob_refs(workspace),
            keys.sequence(workspace),
            keys.changelog(workspace),
            keys.deleted(workspace),
            keys.topics(workspace),
            prefixes["note"],
            prefixes["links_out"],
            prefixes["links_in"],
            prefixes["by_recent"],
            prefixes["by_name"],
            prefixes["by_version"],
            prefixes["by_kind"],
            prefixes["blob"],
            str(changelog_maxlen),
            author,
            str(changelog_maxlen),
            f"{SCHEME}{workspace}/",
            "" if written_before_ms is None else str(written_before_ms),
            prefixes["version"],
            prefixes["versions"],
            prefixes["version_times"],
            prefixes["links_at"],
            *members,
        )
    return [m.decode() if isinstance(m, bytes) else str(m) for m in deleted]


async def delete_notes(
    client: RedisCommands, target: Target, *, author: str, changelog_maxlen: int
) -> DeleteReport:
    """Delete every note of ``target``; a note written meanwhile is deleted or kept, whole."""
    report = DeleteReport(target.label)
    ws = target.workspace
    if target.member is not None:
        gone = await delete_members(
            client, ws, [target.member], author=author, changelog_maxlen=changelog_maxlen
        )
        if not gone:
            raise NotFound(f"no note at {target.label}", uris=[target.label])
        report.add(ws, gone)
        return report
    async with client.operation():
        topics = await _topics(client, target)
    for topic in topics:
        while True:
            # The next batch is whatever is left: notes written into the topic while it is
            # being deleted are deleted too, until the topic is found empty once.
            async with client.operation():
                paths = await client.redis.zrange(keys.by_name(ws, topic), 0, BATCH - 1)
            if not paths:
                break
            members = [f"{topic}/{p.decode()}" for p in paths]
            report.add(
                ws,
                await delete_members(
                    client, ws, members, author=author, changelog_maxlen=changelog_maxlen
                ),
            )
    return report


async def forget_workspace(client: RedisCommands, ws: str) -> None:
    """Drop an emptied workspace from the registry and drop its retention settings.

    Its audit stream and revocations stay: an audit trail must outlive a deletion, and a token
    revoked before it must stay revoked if the workspace is written again. The registry key
    has no hash tag, so it is touched alone (one command each), never inside a script.
    """
    async with client.operation():
        await client.redis.delete(keys.retention(ws))
        await client.redis.srem(keys.workspaces(), ws)
        # A write that raced the delete registered the workspace before this SREM and left a
        # topic behind: register it again, as its own write would have.
        if await client.redis.scard(keys.topics(ws)):
            await client.redis.sadd(keys.workspaces(), ws)
