"""list_keys pages: a keyset over each order, so a listing can be walked to its end.

Every order is a total order on a key that belongs to the note:

- ``recent``: the sequence number of the note's last write, newest first (unique per workspace),
  read from the topic's sets by kind (there is no set of all its notes by recency);
- ``version``: the version, highest first, then topic, then path;
- ``name``: topic, then path;
- a change feed (``cursor=``): the sequence number, oldest first.

A page holds the first rows whose key comes after the ``after`` key, and ``next`` is the key
of the last row shown. A note that is not written while a listing is walked keeps its key, so
it is shown exactly once: on the page whose range of keys holds it. A note written meanwhile
gets a new key (a later sequence number, a higher version): it is shown on the page that
reaches its new key, if any, so it may be missed or shown twice; a change feed from the
first page's ``cursor`` finds every such write. New notes appear if their key is still ahead.

``next`` is opaque to callers: ``<order letter><score>:<topic>/<path>``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..connection import _key_names as keys
from ..connection._board_client import BoardClient
from ..connection._field_names import FIELD
from ..notes._addresses import Address
from ..notes._notes import KINDS
from ..requests._page_keys import Row, make_row

# A kind filter on name or version order examines at most this many notes per topic per
# call; a page may then hold fewer rows than ``limit`` (even none) and still carry ``next``.
SCAN_CAP = 5000
_CHUNK = 500
# Every topic's first rows are asked together, in round trips of about this many commands: a
# listing of every topic holds one connection for a few round trips, however many topics
# there are, and the replies of each stay of a bounded size.
_COMMANDS_PER_ROUND_TRIP = 1000


async def history_page(
    client: BoardClient, note: Address, *, limit: int, after: Row | None
) -> tuple[list[Row], Row | None]:
    """A page of ``note``'s versions, newest first: the current one (on the first page),
    then the kept ones (store/notes/_history.py), below ``after``'s version if given."""
    ws, member = note.workspace, note.member
    top = "+inf" if after is None else f"({after.score}"
    current, kept = await client.round_trip(
        [
            ("HGET", keys.note(ws, member), FIELD.version),
            ("ZREVRANGEBYSCORE", keys.versions(ws, member), top, "-inf", "LIMIT", 0, limit + 1),
        ]
    )
    versions = [int(v) for v in kept]
    if current is not None and (after is None or int(current) < after.score):
        versions.insert(0, int(current))
    rows = [make_row("history", note.topic, note.path, v) for v in versions]
    return rows[:limit], rows[limit] if len(rows) > limit else None


# Version order within one topic: score (version) descending, path ascending. Redis orders a
# sorted set by (score, member) ascending, so ties at one score are a run of ranks in path
# order; the script walks scores downwards and each score's run upwards. It runs whole, so
# ranks cannot shift under it while concurrent writes move other notes between versions.
# ARGV: how = none | all | below | after, the cursor's score and path, the count wanted.
# ``after`` resumes just past the cursor's path inside the run at its score; if that note has
# moved to another version since, its place is found by bisection, comparing bytes as Redis
# does (Lua's own string comparison follows the server's locale).
_VERSION_PAGE = """
local key = KEYS[1]
local how, score, path = ARGV[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])
local function after(a, b)
  local m = math.min(#a, #b)
  for i = 1, m do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end
local out = {}
local upper = '+inf'
if how ~= 'none' then
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local last = lo + redis.call('ZCOUNT', key, score, score) - 1
  local start = last + 1
  if how == 'all' then
    start = lo
  elseif how == 'after' then
    local current = redis.call('ZSCORE', key, path)
    if current and tonumber(current) == tonumber(score) then
      start = redis.call('ZRANK', key, path) + 1
    else
      local l, h = lo, last + 1
      while l < h do
        local mid = math.floor((l + h) / 2)
        if after(redis.call('ZRANGE', key, mid, mid)[1], path) then h = mid else l = mid + 1 end
      end
      start = l
    end
  end
  if start <= last then
    local got = redis.call('ZRANGE', key, start, math.min(last, start + n - 1), 'WITHSCORES')
    for i = 1, #got do out[#out + 1] = got[i] end
  end
  upper = '(' .. score
end
while #out < 2 * n do
  local top = redis.call('ZREVRANGEBYSCORE', key, upper, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #top == 0 then break end
  local s = top[2]
  local got = redis.call('ZRANGEBYSCORE', key, s, s, 'WITHSCORES', 'LIMIT', 0, n - #out / 2)
  for i = 1, #got do out[#out + 1] = got[i] end
  upper = '(' .. s
end
return out
"""


async def select_page(
    client: BoardClient,
    workspace: str,
    topics: list[str],
    *,
    feed: str,
    kind: str | None,
    limit: int,
    after: Row | None,
    since: int | None,
) -> tuple[list[Row], Row | None]:
    """Up to ``limit`` rows after ``after``, and the key to continue from if there may be more.

    ``feed`` is an order or ``changes``. Each topic answers up to limit + 1 rows, or as far as
    it examined (a kind filter stops at SCAN_CAP); the merged page holds only rows up to the
    nearest point some topic stopped at, so no row of any topic is passed over.
    """
    if feed in ("recent", "changes") or kind is None:
        answers = await _first_rows(
            client,
            workspace,
            topics,
            feed=feed,
            kind=kind,
            after=after,
            since=since,
            want=limit + 1,
        )
    else:
        answers = await asyncio.gather(
            *(
                _kind_rows(client, workspace, t, feed=feed, kind=kind, after=after, want=limit + 1)
                for t in topics
            )
        )
    rows = sorted(r for found, _ in answers for r in found)
    stops = [stop for _, stop in answers if stop is not None]
    bound = min(stops) if stops else None
    if bound is not None:
        rows = [r for r in rows if r <= bound]
    page = rows[:limit]
    if len(rows) > limit:
        return page, page[-1]
    if bound is not None:
        # Everything up to ``bound`` was examined: continue after it even if none matched.
        return page, bound
    return page, None


async def _first_rows(
    client: BoardClient,
    workspace: str,
    topics: list[str],
    *,
    feed: str,
    kind: str | None,
    after: Row | None,
    since: int | None,
    want: int,
) -> list[tuple[list[Row], Row | None]]:
    """Each topic's rows after ``after`` and where it stopped looking (None: at its end), for
    an order each topic answers in one command or a few: the topics are asked together, in
    round trips of about _COMMANDS_PER_ROUND_TRIP commands, each group's commands made and
    its rows read between round trips, so the loop serves other calls meanwhile."""
    answers: list[tuple[list[Row], Row | None]] = []
    next_topic = 0
    while next_topic < len(topics):
        group: list[tuple[str, int]] = []
        commands: list[tuple[Any, ...]] = []
        while next_topic < len(topics) and len(commands) < _COMMANDS_PER_ROUND_TRIP:
            topic = topics[next_topic]
            asked = _chunk_commands(workspace, topic, feed, kind, after, since, want)
            group.append((topic, len(asked)))
            commands += asked
            next_topic += 1
        replies = await client.round_trip(commands) if commands else []
        at = 0
        for topic, count in group:
            rows = _chunk_rows(feed, topic, replies[at : at + count], want)
            at += count
            answers.append((rows, rows[-1] if len(rows) == want else None))
    return answers


async def _kind_rows(
    client: BoardClient,
    workspace: str,
    topic: str,
    *,
    feed: str,
    kind: str,
    after: Row | None,
    want: int,
) -> tuple[list[Row], Row | None]:
    """Rows of one topic of ``kind`` in name or version order after ``after``, and where it
    stopped looking (None: at its end): the order is walked, notes of that kind kept."""
    found: list[Row] = []
    position = after
    examined = 0
    kind_key = keys.by_kind(workspace, topic, kind)
    while examined < SCAN_CAP:
        chunk = await _chunk(client, workspace, topic, feed, position, _CHUNK)
        if not chunk:
            return found, None
        examined += len(chunk)
        scores = await client.redis.zmscore(kind_key, [r.path for r in chunk])  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
        for row, score in zip(chunk, scores, strict=True):
            if score is not None:
                found.append(row)
                if len(found) == want:
                    return found, row
        position = chunk[-1]
        if len(chunk) < _CHUNK:
            return found, None
    return found, position


async def _chunk(
    client: BoardClient, workspace: str, topic: str, feed: str, after: Row | None, want: int
) -> list[Row]:
    """Up to ``want`` rows of one topic's name or version order after ``after``."""
    commands = _chunk_commands(workspace, topic, feed, None, after, None, want)
    replies = await client.round_trip(commands) if commands else []
    return _chunk_rows(feed, topic, replies, want)


def _chunk_commands(
    workspace: str,
    topic: str,
    feed: str,
    kind: str | None,
    after: Row | None,
    since: int | None,
    want: int,
) -> list[tuple[Any, ...]]:
    """The commands that read up to ``want`` rows of one topic's index after ``after``, in the
    feed's order; ``_chunk_rows`` reads their replies."""
    if after is not None and feed == "name" and topic < after.topic:
        return []
    if feed in ("recent", "changes"):
        # A topic's notes by their last write are the union of its sets by kind, which hold
        # each note once, scored by that write's sequence number: each set's first ``want``,
        # merged by ``_chunk_rows``.
        commands: list[tuple[Any, ...]] = []
        for k in [kind] if kind else KINDS:
            key = keys.by_kind(workspace, topic, k)
            if feed == "changes":
                low = max(since or 0, after.score if after else 0)
                span: tuple[Any, ...] = ("ZRANGEBYSCORE", key, f"({low}", "+inf")
            else:
                high = f"({after.score}" if after else "+inf"
                span = ("ZREVRANGEBYSCORE", key, high, "-inf")
            commands.append((*span, "WITHSCORES", "LIMIT", 0, want))
        return commands
    if feed == "name":
        lowest = f"({after.path}" if after and topic == after.topic else "-"
        return [("ZRANGEBYLEX", keys.by_name(workspace, topic), lowest, "+", "LIMIT", 0, want)]
    if after is None:
        how, score, path = "none", "", ""
    elif topic < after.topic:
        how, score, path = "below", str(after.score), ""  # its ties came before the cursor
    elif topic > after.topic:
        how, score, path = "all", str(after.score), ""  # all of its ties come after
    else:
        how, score, path = "after", str(after.score), after.path
    key = keys.by_version(workspace, topic)
    return [("EVAL", _VERSION_PAGE, 1, key, how, score, path, want)]


def _chunk_rows(feed: str, topic: str, replies: list[Any], want: int) -> list[Row]:
    """The rows in the replies to ``_chunk_commands`` (raw, from a wire: a member and its
    score alternating, or members alone for name order)."""
    if feed == "name":
        members = replies[0] if replies else []
        return [make_row(feed, topic, m.decode(), 0.0) for m in members]
    merged = [(flat[i], float(flat[i + 1])) for flat in replies for i in range(0, len(flat), 2)]
    if feed in ("recent", "changes"):
        merged = sorted(merged, key=lambda pair: pair[1], reverse=feed == "recent")[:want]
    return [make_row(feed, topic, m.decode(), score) for m, score in merged]
