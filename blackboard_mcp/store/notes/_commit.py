"""The last step of every write: give it the workspace's next sequence number.

The number has to follow commit order, or a reader holding cursor N could miss a write that
committed after it with a smaller number. A script queued inside MULTI runs at EXEC time, in
order with the rest of the transaction, so INCR there is commit-ordered; it also stamps the
server's clock so notes written from many machines share one time source.

The note's own fields are written by the same script, in the same HSET as its sequence number
and times: RediSearch re-indexes a hash (body included) on every command that changes it, so
writing the note and then stamping it in separate commands indexed every write two or three
times and left the stale entries for the index's garbage collector.

A whole write (update_state) is one script: it keeps the version it replaces (history), runs
the write's other commands (the topic's indexes, a blob's reference counts), then commits.
Its MULTI holds nothing else, so the script can go by hash: a Redis that has not loaded it
runs nothing of the write (store/connection/_scripts.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..connection import _key_names as keys
from ..connection._field_names import lua
from ..connection._tx import Transaction
from ._history import KEEP_VERSION_LUA, HistoryLimits

# commit() stamps the write with the workspace's next sequence number and the server's time,
# writes the note's fields (``ARGV[first_field]`` on, in pairs; none for a link), and logs
# the change.
_COMMIT_LUA = lua("""
local function commit(sequence, note, by_kind, changelog, path, maxlen, op, uri, version,
                      author, is_new, first_field)
  local seq = redis.call('INCR', sequence)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if op ~= 'link' and op ~= 'unlink' then
    local fields = {$seq, seq, $updated, now}
    if is_new == '1' then
      fields[#fields + 1] = $created
      fields[#fields + 1] = now
    end
    for i = first_field, #ARGV do
      fields[#fields + 1] = ARGV[i]
    end
    redis.call('HSET', note, unpack(fields))
    redis.call('ZADD', by_kind, seq, path)
  end
  redis.call('XADD', changelog, 'MAXLEN', '~', maxlen, '*',
    'seq', seq, 'op', op, 'uri', uri, 'version', version, 'author', author, 'at', now)
  return seq
end
""")

# KEYS: 1 the sequence, 2 the note, 3 its kind's set, 4 the change log. ARGV: 1 path,
# 2 change log length, 3 op, 4 address, 5 version, 6 author, 7 new ('1'), 8 on: fields.
_SCRIPT = (
    _COMMIT_LUA
    + """
return commit(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
  ARGV[6], ARGV[7], 8)
"""
)

# KEYS: 1 the note, 2 its versions, 3 blob refs, 4 kept versions by time, 5 the history
# policy, 6 the sequence, 7 the note's kind's set, 8 the change log, 9 on: the commands' keys.
# ARGV: 1-6 keep_version's (version prefix, blob prefix, member, topic, versions kept, max
# age); 7-13 commit's (path, change log length, op, address, version, author, new); 14 how
# many words the commands take, then the commands, each as its word count, its name, its
# key's index in KEYS and its arguments; then the note's fields.
_WRITE = (
    KEEP_VERSION_LUA
    + _COMMIT_LUA
    + """
keep_version(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2], ARGV[3], ARGV[4],
  tonumber(ARGV[5]), tonumber(ARGV[6]))
local last = 14 + tonumber(ARGV[14])
local i = 15
while i <= last do
  local n = tonumber(ARGV[i])
  local command = {ARGV[i + 1], KEYS[tonumber(ARGV[i + 2])]}
  for j = 3, n do
    command[j] = ARGV[i + j]
  end
  redis.call(unpack(command))
  i = i + n + 1
end
return commit(KEYS[6], KEYS[1], KEYS[7], KEYS[8], ARGV[7], ARGV[8], ARGV[9], ARGV[10],
  ARGV[11], ARGV[12], ARGV[13], last + 1)
"""
)


class WriteCommands:
    """The commands a whole write runs between keeping the old version and committing, each
    on one key (in the note's slot), collected for its script."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.words: list[Any] = []

    def add(self, name: str, key: str, *arguments: Any) -> None:
        self.keys.append(key)
        self.words += [len(arguments) + 2, name, 8 + len(self.keys), *arguments]


def _flat(note_fields: Mapping[str, bytes | float | int | str] | None) -> list[Any]:
    return [v for pair in (note_fields or {}).items() for v in pair]


def queue_write(
    tx: Transaction,
    *,
    workspace: str,
    topic: str,
    member: str,
    kind: str,
    op: str,
    uri: str,
    version: int,
    author: str,
    changelog_maxlen: int,
    history: HistoryLimits,
    commands: WriteCommands,
    note_fields: Mapping[str, bytes | float | int | str],
    is_new: bool,
) -> None:
    """Queue a whole write as its one script: keep the note's version, run ``commands``,
    then write ``note_fields`` with ``seq`` and ``updated`` (and ``created`` when
    ``is_new``). The reply in EXEC is the new sequence number."""
    tx.queue(
        "EVAL",
        _WRITE,
        8 + len(commands.keys),
        keys.note(workspace, member),
        keys.versions(workspace, member),
        keys.blob_refs(workspace),
        keys.version_times(workspace),
        keys.retention(workspace),
        keys.sequence(workspace),
        keys.by_kind(workspace, topic, kind),
        keys.changelog(workspace),
        *commands.keys,
        keys.version(workspace, member, ""),
        keys.blob(workspace, ""),
        member,
        topic,
        history.versions,
        history.max_age_ms // 1000,
        member.split("/", 1)[1],
        str(changelog_maxlen),
        op,
        uri,
        str(version),
        author,
        "1" if is_new else "0",
        len(commands.words),
        *commands.words,
        *_flat(note_fields),
    )


def queue_commit(
    tx: Transaction,
    *,
    workspace: str,
    topic: str,
    member: str,
    kind: str,
    op: str,
    uri: str,
    version: int,
    author: str,
    changelog_maxlen: int,
    note_fields: Mapping[str, bytes | float | int | str] | None = None,
    is_new: bool = False,
) -> None:
    """Queue the note's write with its sequence number and change-log entry.

    ``note_fields`` are written to the note's hash with ``seq`` and ``updated`` (and
    ``created`` when ``is_new``) in one HSET; a link or an unlink writes no note fields. The
    reply in EXEC is the new sequence number.
    """
    path = member.split("/", 1)[1]
    tx.queue(
        "EVAL",
        _SCRIPT,
        4,
        keys.sequence(workspace),
        keys.note(workspace, member),
        keys.by_kind(workspace, topic, kind),
        keys.changelog(workspace),
        path,
        str(changelog_maxlen),
        op,
        uri,
        str(version),
        author,
        "1" if is_new else "0",
        *_flat(note_fields),
    )
