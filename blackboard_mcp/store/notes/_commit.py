"""The last step of every write: give it the workspace's next sequence number.

The number has to follow commit order, or a reader holding cursor N could miss a write that
committed after it with a smaller number. A script queued inside MULTI runs at EXEC time, in
order with the rest of the transaction, so INCR there is commit-ordered; it also stamps the
server's clock so notes written from many machines share one time source.

The note's own fields are written by the same script, in the same HSET as its sequence number
and times: RediSearch re-indexes a hash (body included) on every command that changes it, so
writing the note and then stamping it in separate commands indexed every write two or three
times and left the stale entries for the index's garbage collector.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..connection import _key_names as keys
from ..connection._field_names import lua
from ..connection._tx import Transaction

_SCRIPT = lua("""
local seq = redis.call('INCR', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[3] ~= 'link' and ARGV[3] ~= 'unlink' then
  local fields = {$seq, seq, $updated, now}
  if ARGV[7] == '1' then
    fields[#fields + 1] = $created
    fields[#fields + 1] = now
  end
  for i = 8, #ARGV do
    fields[#fields + 1] = ARGV[i]
  end
  redis.call('HSET', KEYS[2], unpack(fields))
  redis.call('ZADD', KEYS[3], seq, ARGV[1])
end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[2], '*',
  'seq', seq, 'op', ARGV[3], 'uri', ARGV[4], 'version', ARGV[5], 'author', ARGV[6],
  'at', now)
return seq
""")


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
    flat = [v for pair in (note_fields or {}).items() for v in pair]
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
        *flat,
    )
