"""Retention: a maximum age since a note's last write, per workspace with per-topic overrides.

Off by default. The policy lives in Redis (one hash per workspace), so every gateway process
enforces the same one; one of them at a time sweeps, the holder of a lease key that expires
when it stops renewing it (a process that dies hands the sweep to another within the lease).

A topic's expired notes are found by their last-write time in the search index (``updated``
is a sortable numeric field there), a batch at a time, so a pass costs one query per topic
plus one per batch of notes it deletes. Write order would not do: an imported note keeps its
old time but takes a new place in that order, behind notes that are still fresh. The delete
itself checks the note's time again, atomically: a note written again after the sweep found
it is kept.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from redis.commands.search.query import Query

from .._errors import InvalidArgument
from ..connection import _key_names as keys
from ..connection._board_client import RedisCommands
from ..notes._addresses import validate_name
from ..notes._history import EXPIRE_VERSIONS, MAX_HISTORY_VERSIONS
from ..search._query import escape_tag
from ._delete import BATCH, REPORTED, DeleteReport, delete_members

log = logging.getLogger(__name__)

# Where a workspace's notes are searched: its home Redis and the index name there.
Locate = Callable[[str], Awaitable[tuple[RedisCommands, str]]]

WORKSPACE_FIELD = "*"
# Note history's bounds in the same hash (store/notes/_history.py reads them): a prefix and
# then ``*`` or a topic. Topic names cannot hold a colon, so these never read as a topic.
VERSIONS_PREFIX = "versions:"
VERSION_AGE_PREFIX = "version-age:"
# Renews the lease only while this process still holds it; takes it when it is free.
_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""


@dataclass(frozen=True)
class RetentionPolicy:
    """Maximum ages in seconds; ``None`` keeps notes forever, as does a topic's 0.

    ``versions`` and ``version_ages`` are note history's bounds set for this workspace
    (under ``*``) or a topic: past versions kept per note, and their maximum age in seconds
    (0: no age bound); what is not set here is the board's (BB_HISTORY_VERSIONS and
    BB_HISTORY_MAX_AGE_SECONDS).
    """

    max_age_seconds: int | None = None
    topics: dict[str, int] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    version_ages: dict[str, int] = field(default_factory=dict)

    def max_age(self, topic: str) -> int | None:
        age = self.topics.get(topic, self.max_age_seconds)
        return age or None

    @property
    def enabled(self) -> bool:
        return bool(self.max_age_seconds) or any(self.topics.values())

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "max_age_seconds": self.max_age_seconds,
            "topics": dict(sorted(self.topics.items())),
        }
        if self.versions or self.version_ages:
            out["history"] = {
                "versions": dict(sorted(self.versions.items())),
                "max_age_seconds": dict(sorted(self.version_ages.items())),
            }
        return out


@dataclass(frozen=True)
class Swept:
    """What one sweep deleted in one topic."""

    workspace: str
    topic: str
    members: list[str]


def _policy(raw: dict[bytes, bytes]) -> RetentionPolicy:
    values = {k.decode(): int(v) for k, v in raw.items()}
    versions = {
        k.removeprefix(VERSIONS_PREFIX): v
        for k, v in values.items()
        if k.startswith(VERSIONS_PREFIX)
    }
    ages = {
        k.removeprefix(VERSION_AGE_PREFIX): v
        for k, v in values.items()
        if k.startswith(VERSION_AGE_PREFIX)
    }
    topics = {k: v for k, v in values.items() if ":" not in k}
    return RetentionPolicy(
        max_age_seconds=topics.pop(WORKSPACE_FIELD, None) or None,
        topics=topics,
        versions=versions,
        version_ages=ages,
    )


async def read_policy(client: RedisCommands, ws: str) -> RetentionPolicy:
    async with client.operation():
        return _policy(await client.redis.hgetall(keys.retention(ws)))


async def write_policy(
    client: RedisCommands,
    ws: str,
    *,
    topic: str | None = None,
    max_age_seconds: int | None,
) -> RetentionPolicy:
    """Set (or, with ``None``, clear) the workspace's maximum age or one topic's override;
    ``ws`` and ``topic`` are checked names."""
    name = WORKSPACE_FIELD if topic is None else topic
    if max_age_seconds is not None and max_age_seconds < 0:
        raise InvalidArgument("max_age_seconds cannot be negative", argument="max_age")
    key = keys.retention(ws)
    async with client.operation():
        if max_age_seconds is None:
            await client.redis.hdel(key, name)
        else:
            await client.redis.hset(key, name, str(max_age_seconds))
        return _policy(await client.redis.hgetall(key))


async def write_history_policy(
    client: RedisCommands,
    workspace: str,
    *,
    topic: str | None = None,
    versions: int | None,
    max_age_seconds: int | None,
) -> RetentionPolicy:
    """Set the workspace's (or a topic's) history bounds; ``None`` clears one, so the
    workspace's (for a topic) or the board's applies."""
    ws = validate_name(workspace, "workspace")
    name = WORKSPACE_FIELD if topic is None else validate_name(topic, "topic")
    for value, argument in ((versions, "versions"), (max_age_seconds, "max_age")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidArgument(f"{argument} must be a whole number", argument=argument)
        if value is not None and value < 0:
            raise InvalidArgument(f"{argument} cannot be negative", argument=argument)
    if versions is not None and versions > MAX_HISTORY_VERSIONS:
        raise InvalidArgument(f"versions is at most {MAX_HISTORY_VERSIONS}", argument="versions")
    key = keys.retention(ws)
    async with client.operation():
        for prefix, value in ((VERSIONS_PREFIX, versions), (VERSION_AGE_PREFIX, max_age_seconds)):
            if value is None:
                await client.redis.hdel(key, prefix + name)
            else:
                await client.redis.hset(key, prefix + name, str(value))
        return _policy(await client.redis.hgetall(key))


async def hold_lease(client: RedisCommands, owner: str, seconds: float) -> bool:
    """Take or renew the sweeper's lease for ``seconds``; False while another process holds it."""
    async with client.operation():
        held = await client.redis.eval(  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            _LEASE, 1, keys.retention_lease(), owner, str(max(1, int(seconds * 1000)))
        )
    return bool(held)


async def sweep(
    client: RedisCommands,
    *,
    locate: Locate,
    owner: str,
    lease_seconds: float,
    changelog_maxlen: int,
    author: str = "retention",
    now_ms: int | None = None,
    version_max_age_seconds: int = 0,
) -> list[Swept] | None:
    """Delete every note older than its topic's maximum age, and every kept past version
    older than its topic's history age (``version_max_age_seconds``, the board's, unless the
    policy says otherwise); None when another holds the lease.

    Ages are counted to ``now_ms``, by default the Redis server's clock (the one every note's
    time comes from), so gateways whose clocks disagree sweep alike.
    """
    if not await hold_lease(client, owner, lease_seconds):
        return None
    out: list[Swept] = []
    async with client.operation():
        workspaces = sorted(w.decode() for w in await client.redis.smembers(keys.workspaces()))
    for ws in workspaces:
        policy = await read_policy(client, ws)
        async with client.operation():
            seconds, micros = await client.redis.time()
        cutoff_at = int(seconds) * 1000 + int(micros) // 1000 if now_ms is None else now_ms
        home, _index = await locate(ws)
        dropped = await expire_versions(
            home, ws, policy, default_age=version_max_age_seconds, now_ms=cutoff_at
        )
        if dropped:
            log.info("retention: %d past versions of workspace %s expired", dropped, ws)
        if not policy.enabled:
            continue
        async with client.operation():
            topics = sorted(t.decode() for t in await client.redis.smembers(keys.topics(ws)))
        for topic in topics:
            age = policy.max_age(topic)
            if age is None:
                continue
            home, index = await locate(ws)
            gone = await _sweep_topic(
                home,
                index,
                ws,
                topic,
                cutoff_ms=cutoff_at - age * 1000,
                author=author,
                changelog_maxlen=changelog_maxlen,
            )
            if gone:
                out.append(Swept(ws, topic, gone))
            if not await hold_lease(client, owner, lease_seconds):
                return out  # lost the lease mid-sweep (a long pause): the holder carries on
    return out


async def expire_versions(
    client: RedisCommands,
    ws: str,
    policy: RetentionPolicy,
    *,
    default_age: int,
    now_ms: int,
) -> int:
    """Drop the workspace's kept versions written before their topic's history age, oldest
    first, a batch a round trip; returns how many went. A batch of which none could go (the
    oldest versions all in topics that keep theirs longer) ends the pass."""
    ages = [a for a in (default_age, *policy.version_ages.values()) if a > 0]
    if not ages:
        return 0
    oldest_expirable = now_ms - min(ages) * 1000
    dropped = 0
    while True:
        async with client.operation():
            gone, looked = await client.redis.eval(  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
                EXPIRE_VERSIONS,
                3,
                keys.version_times(ws),
                keys.blob_refs(ws),
                keys.retention(ws),
                keys.version(ws, "", "")[:-1],
                keys.versions(ws, ""),
                keys.blob(ws, ""),
                str(default_age),
                str(BATCH),
                str(now_ms),
                str(oldest_expirable),
            )
        dropped += int(gone)
        if int(looked) < BATCH or not int(gone):
            return dropped


def with_max_age(
    policy: RetentionPolicy, *, topic: str | None, max_age_seconds: int | None
) -> RetentionPolicy:
    """``policy`` as it would be with the workspace's (or ``topic``'s) maximum age set."""
    topics = dict(policy.topics)
    workspace_age = policy.max_age_seconds
    if topic is None:
        workspace_age = max_age_seconds
    elif max_age_seconds is None:
        topics.pop(topic, None)
    else:
        topics[topic] = max_age_seconds
    return dataclasses.replace(policy, max_age_seconds=workspace_age, topics=topics)


async def plan_expiry(
    client: RedisCommands,
    index: str,
    ws: str,
    policy: RetentionPolicy,
    *,
    report: DeleteReport,
) -> DeleteReport:
    """What the next sweep would delete under ``policy``, counted now and deleting nothing:
    how many notes of each topic are older than its maximum age, and the first addresses."""
    async with client.operation():
        seconds, micros = await client.redis.time()
        topics = sorted(t.decode() for t in await client.redis.smembers(keys.topics(ws)))
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    prefix = keys.note(ws, "")
    for topic in topics:
        maximum = policy.max_age(topic)
        if maximum is None:
            continue
        query = _expired_query(ws, topic, now_ms - maximum * 1000, first=REPORTED)
        async with client.operation():
            result = await client.redis.ft(index).search(query)  # type: ignore[misc]  # types-redis 4.6 stubs lag redis-py 8
        members = [str(doc.id).removeprefix(prefix) for doc in result.docs]
        report.add(ws, members)
        report.count += int(result.total) - len(members)
    return report


def _history_bound(bounds: dict[str, int], topic: str, default: int) -> int:
    return bounds.get(topic, bounds.get(WORKSPACE_FIELD, default))


async def plan_history(
    client: RedisCommands,
    ws: str,
    before: RetentionPolicy,
    after: RetentionPolicy,
    *,
    default_versions: int,
    default_age_seconds: int,
    report: DeleteReport,
) -> DeleteReport:
    """The kept past versions that history bounds ``after`` would drop and ``before`` keeps:
    those beyond a note's count (dropped at its next write) or older than their topic's age
    (dropped by the next sweep). Counted now; nothing is dropped."""
    async with client.operation():
        seconds, micros = await client.redis.time()
        kept = await client.redis.zrange(keys.version_times(ws), 0, -1, withscores=True)
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    by_note: dict[str, list[tuple[int, float]]] = {}
    for raw, written in kept:
        member, _, number = raw.decode().rpartition("@")
        if member and number.isdigit():
            by_note.setdefault(member, []).append((int(number), written))

    def gone(policy: RetentionPolicy, topic: str, versions: list[tuple[int, float]]) -> set[int]:
        keep = _history_bound(policy.versions, topic, default_versions)
        age = _history_bound(policy.version_ages, topic, default_age_seconds)
        out = {v for v, _ in sorted(versions, reverse=True)[keep:]}
        if age:
            out |= {v for v, written in versions if written < now_ms - age * 1000}
        return out

    dropped: list[str] = []
    for member, versions in sorted(by_note.items()):
        topic = member.split("/", 1)[0]
        newly = gone(after, topic, versions) - gone(before, topic, versions)
        dropped.extend(f"{member}@{v}" for v in sorted(newly))
    report.add(ws, dropped)
    return report


def _expired_query(ws: str, topic: str, cutoff_ms: int, *, first: int = BATCH) -> Query:
    """The topic's notes last written before the cutoff, oldest first, one batch of keys."""
    query: Query = (
        Query(  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
            f"@ws:{{{escape_tag(ws)}}} @topic:{{{escape_tag(topic)}}} @updated:[-inf ({cutoff_ms}]"
        )
        .no_content()
        .sort_by("updated", asc=True)
        .paging(0, first)
        .dialect(2)
    )
    return query


async def _sweep_topic(
    client: RedisCommands,
    index: str,
    ws: str,
    topic: str,
    *,
    cutoff_ms: int,
    author: str,
    changelog_maxlen: int,
) -> list[str]:
    gone: list[str] = []
    prefix = keys.note(ws, "")
    query = _expired_query(ws, topic, cutoff_ms)
    while True:
        async with client.operation():
            result = await client.redis.ft(index).search(query)  # type: ignore[misc]  # types-redis 4.6 stubs lag redis-py 8
        expired = [str(doc.id).removeprefix(prefix) for doc in result.docs]
        deleted = await delete_members(
            client,
            ws,
            expired,
            author=author,
            changelog_maxlen=changelog_maxlen,
            written_before_ms=cutoff_ms,
        )
        gone.extend(deleted)
        # A short batch was the last; a batch of which nothing went (every note written again
        # meanwhile, or the index behind) is left to the next pass rather than asked again.
        if len(expired) < BATCH or not deleted:
            return gone
