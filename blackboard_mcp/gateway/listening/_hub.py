"""Change notifications: one blocking read of the change log per active workspace in this
process, fanned out to the process's listeners.

A write reaches every gateway process through Redis: whichever process committed it, the
change log has its entry, and each process with a listener in that workspace is blocked in
XREAD on it. A listener sees only entries of topics its token may read, and only those its
subscriptions ask for. Listeners that hear the same changes read them from one shared log,
each at its own place: one that falls too far behind is dropped (its stream ends with an
error naming the cursor its client catches up from) and never slows the pump or the other
listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson

from blackboard_mcp.auth import Grant, RevocationList, TokenRevoked
from blackboard_mcp.store import (
    Board,
    Change,
    ChangeFeed,
    GetState,
    Unavailable,
    catch_up_address,
    failure_reason,
)

from .._errors import GatewayError

log = logging.getLogger(__name__)

# How long one XREAD blocks before the pump looks again at whether anyone still listens.
_BLOCK_MS = 5000
# After a failed read (Redis down), wait before the next so a dead Redis is not spun on.
_RETRY_SECONDS = 1.0
# The open streams' tokens are checked against the revocation list this often (all of a
# workspace's in one round trip), so a revoked token stops hearing of changes within about
# this long.
RECHECK_SECONDS = 5.0
# A listen that cannot start its workspace's feed (Redis down) is refused after this long.
_START_SECONDS = 5.0
# A socket write costs far more than the bytes in it (on loopback, tens of microseconds: the
# receiving end's work is done in the sender's call), so under a burst of changes the pump
# reads the change log at most once per ``listeners / writes_per_second`` seconds
# (BB_LISTENER_WRITES_PER_SECOND), and each stream sends what one read brought in one write:
# a stream writes once per read, not once per change. A change after a quiet spell goes out
# at once; under a burst, none waits longer than this for its read:
MAX_WRITE_INTERVAL_SECONDS = 0.075
# Entries one read of the change log takes at most. A read that comes back full is followed
# by the next at once: pacing must never let the pump fall behind a workspace's writes.
_READ_COUNT = 512
# Topics whose readability a listener remembers.
_READABLE_CACHE = 1024


class TooManyListeners(GatewayError):
    """The token already holds its limit of open listeners in this process."""

    code = "rate_limited"
    hint = "close a listener first (BB_LISTENERS_PER_TOKEN bounds them per token)"


class ListenerDropped(GatewayError):
    """The listener did not read its events fast enough and was dropped. ``cursor`` says
    where its client can catch up from: every change after it may not have reached it."""

    code = "overloaded"
    hint = "re-listen, then catch up with list_keys(cursor=<this error's cursor>)"


class Idle(enum.Enum):
    IDLE = "idle"


IDLE = Idle.IDLE


@dataclass(frozen=True, slots=True)
class Notice:
    """A change as every listener that hears it is sent it.

    ``uri_json`` is the change's part of a notification, JSON-encoded once by the pump for
    all of this process's listeners; each stream adds only its own subscription id. A
    notice with ``list_changed`` says instead that what resources/list offers changed, with
    the change that changed it.
    """

    change: Change
    uri_json: bytes
    list_changed: bool = False

    @classmethod
    def of(cls, change: Change) -> Notice:
        return cls(change, orjson.dumps(change.uri))

    @classmethod
    def listed(cls, change: Change) -> Notice:
        return cls(change, b"", list_changed=True)


# Among what a change did to the resource list: the catch-up note came or went (every other
# entry is a topic that gained its first note or lost its last).
CATCH_UP = None
ListEntry = str | None
# A change that may add a note: a write of a new one, the first append to one, an import.
_CREATED = frozenset({"create", "import"})


def _creates(change: Change) -> bool:
    return change.op in _CREATED or (change.op == "append" and change.version == 1)


# Loads of a Listing redone because the change log brought a delete meanwhile: at most.
_LOAD_ATTEMPTS = 5


def _every_topic(_topic: str) -> bool:
    return True


class Listing:
    """What resources/list offers in one workspace, before each token's scopes: its topics
    that have notes, and whether the catch-up note exists; kept in step with the change log
    by the workspace's pump.

    A note written into a topic not listed lists it, and writing the catch-up note lists it:
    neither needs a look at Redis. A delete may empty a topic, so a read that brings one
    looks at the topics once; whatever else changed by then is told then too.
    """

    def __init__(self, board: Board, workspace: str) -> None:
        self._board = board
        self.workspace = workspace
        self._catch_up_uri = catch_up_address(workspace).uri
        self.topics: set[str] = set()
        self.catch_up = False
        self.loaded = False
        # A read of the change log that could change the list came while this was loading:
        # the load may predate it, so it loads again.
        self.missed = False
        self.task: asyncio.Task[None] | None = None

    async def load(self) -> None:
        for _ in range(_LOAD_ATTEMPTS):
            self.missed = False
            topics, catch_up = await self._look()
            if not self.missed:
                break
        self.topics, self.catch_up, self.loaded = topics, catch_up, True

    async def _look(self) -> tuple[set[str], bool]:
        found = await self._board.topics(workspace=self.workspace, readable=_every_topic)
        catch_up = await self._board.get_state(
            GetState.parse({"uris": [self._catch_up_uri], "mode": "ref"})
        )
        return {topic for topic, _count in found}, "error" not in catch_up["items"][0]

    async def follow(self, changes: list[Change]) -> list[tuple[ListEntry, ...]]:
        """For each change, the entries of the list it added or removed."""
        if not self.loaded:
            # A new note the load did not see lists its topic at the topic's next new note;
            # a delete, or the catch-up note, it did not see would stay wrong: load again.
            if any(c.op == "delete" or c.uri == self._catch_up_uri for c in changes):
                self.missed = True
            return [()] * len(changes)
        now: tuple[set[str], bool] | None = None
        if any(c.op == "delete" for c in changes):
            try:
                now = await self._look()
            except Exception as exc:  # Redis away: every delete may have emptied its topic
                log.warning(
                    "resource list of %s: cannot look: %s", self.workspace, failure_reason(exc)
                )
        # A topic emptied and written again within one read is told as changed.
        last_created = {c.topic: n for n, c in enumerate(changes) if _creates(c)}
        told: list[tuple[ListEntry, ...]] = []
        for n, change in enumerate(changes):
            entries: list[ListEntry] = []
            topic = change.topic
            if change.op == "delete":
                emptied = now is None or topic not in now[0] or last_created.get(topic, -1) > n
                if topic in self.topics and emptied:
                    self.topics.discard(topic)
                    entries.append(topic)
                if change.uri == self._catch_up_uri and self.catch_up:
                    self.catch_up = False
                    entries.append(CATCH_UP)
            elif _creates(change):
                if topic not in self.topics:
                    self.topics.add(topic)
                    entries.append(topic)
                if change.uri == self._catch_up_uri and not self.catch_up:
                    self.catch_up = True
                    entries.append(CATCH_UP)
            told.append(tuple(entries))
        if now is not None:
            # What got listed by changes this read did not bring: told now, and those
            # changes, once read, find it listed.
            now_topics, catch_up = now
            for topic in now_topics - self.topics:
                self.topics.add(topic)
                told[-1] += (topic,)
            if catch_up and not self.catch_up:
                self.catch_up = True
                told[-1] += (CATCH_UP,)
        return told


@dataclass(eq=False)
class Interest:
    """What some listeners of one workspace hear: the topics their tokens may read, and the
    topics and notes they follow. Listeners alike share one, so the pump decides once per
    change for all of them whether it is heard (a fleet's listeners mostly are alike).

    The changes they hear wait in one shared log, which each listener reads from a cursor of
    its own: handing a change to its listeners is one append, not one per listener. The log
    is trimmed to the slowest listener's cursor each time it reaches twice ``limit``; a
    listener more than ``limit`` changes behind then is dropped.
    """

    # The first listener's token: every listener here reads the topics it reads.
    reader: Grant
    notes: frozenset[str]
    # None: every topic the token may read.
    topics: frozenset[str] | None
    limit: int  # BB_LISTENER_QUEUE
    # Its listeners also hear when what resources/list offers their token changes.
    lists: bool = False
    # A dict for its order and its O(1) removal.
    listeners: dict[Listener, None] = field(default_factory=dict)
    readable: dict[str, bool] = field(default_factory=dict)
    log: list[Notice] = field(default_factory=list)
    base: int = 0  # the position, since the interest began, of ``log[0]``
    # Listeners waiting for the next change, woken (and forgotten) by the next append.
    sleepers: list[Listener] = field(default_factory=list)
    # Told of each listener dropped for falling behind (the gateway counts them).
    on_drop: Callable[[], None] = field(default=lambda: None)

    @property
    def key(self) -> tuple[tuple[str, ...], frozenset[str], frozenset[str] | None, bool]:
        return self.reader.read_topics, self.notes, self.topics, self.lists

    @property
    def head(self) -> int:
        """The position the next change will have."""
        return self.base + len(self.log)

    def can_read(self, topic: str) -> bool:
        readable = self.readable.get(topic)
        if readable is None:
            # Scopes never change, and a topic is matched against them once.
            if len(self.readable) >= _READABLE_CACHE:
                self.readable.clear()
            readable = self.readable[topic] = self.reader.can_read(topic)
        return readable

    def hears_listing(self, entries: tuple[ListEntry, ...]) -> bool:
        """Whether a change of these list entries changes what its listeners are offered:
        the catch-up note is every reader's; a topic, only its readers'."""
        return self.lists and any(e is CATCH_UP or self.can_read(e) for e in entries)

    def wants(self, change: Change) -> bool:
        readable = self.readable.get(change.topic)
        if readable is None:
            readable = self.can_read(change.topic)
        if not readable:
            # The catch-up note is every reader's, whatever its topics: followed by its
            # address (admitted as get_state's read of it), it is heard; no other note of
            # its topic is.
            return change.uri in self.notes and change.uri == catch_up_address(change.workspace).uri
        if self.topics is None:
            return True
        return change.topic in self.topics or change.uri in self.notes

    def publish(self, notice: Notice) -> None:
        self.log.append(notice)
        if self.sleepers:
            sleepers, self.sleepers = self.sleepers, []
            for listener in sleepers:
                listener.asleep = False
                listener.wake()
        if len(self.log) >= 2 * self.limit:
            self._trim()

    def _trim(self) -> None:
        head = self.head
        keep = head
        for listener in list(self.listeners):
            if listener.dropped:
                continue
            if head - listener.cursor > self.limit:
                if listener.resume_after is None:
                    # Nothing was taken yet: it missed everything from its place on.
                    listener.resume_after = self.log[listener.cursor - self.base].change.seq - 1
                listener.drop(head - listener.cursor)
                self.on_drop()
            else:
                keep = min(keep, listener.cursor)
        del self.log[: keep - self.base]
        self.base = keep

    def read(self, listener: Listener, count: int) -> list[Notice]:
        """Up to ``count`` changes from ``listener``'s cursor, which moves past them."""
        if listener.dropped:
            return []  # its place in the log may be trimmed away; its stream is ending
        start = listener.cursor - self.base
        taken = self.log[start : start + count]
        listener.cursor += len(taken)
        if taken and listener.resume_after is None:
            listener.resume_after = taken[0].change.seq - 1
        return taken


@dataclass(eq=False)
class Listener:
    """One open subscription: where it is in its Interest's shared log of changes."""

    grant: Grant
    interest: Interest
    cursor: int = 0
    waiter: asyncio.Future[bool] | None = None
    on_drop: Callable[[], None] = field(default=lambda: None)
    dropped: bool = False
    closing: bool = False  # end the stream once what is waiting is sent
    asleep: bool = False  # in its interest's sleepers, until the next change wakes it
    # The change log's sequence number up to which its client has been handed every change
    # it hears (None before it has taken any): a dropped client catches up from there.
    resume_after: int | None = None
    revoked: bool = False  # its token was found revoked: the stream ends
    # One timer a listener, moved only when a wait must end sooner than it: a wait that ends
    # with a change (most of them, under load) leaves it for the next, instead of each wait
    # setting a timer and cancelling it, thousands of times a second over many listeners.
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    _wait_until: float = 0.0

    @property
    def limit(self) -> int:
        return self.interest.limit

    @property
    def has_changes(self) -> bool:
        return self.cursor < self.interest.head

    def handed(self, notices: list[Notice]) -> None:
        """``notices`` were written to the client's stream, in full."""
        self.resume_after = notices[-1].change.seq

    def drop(self, behind: int) -> None:
        self.dropped = True
        log.warning(
            "listener of %s in %s dropped (overloaded): %d changes waiting",
            self.grant.subject,
            self.grant.workspace,
            behind,
        )
        self.on_drop()

    def close(self) -> None:
        """End the stream after what is waiting."""
        self.closing = True
        self.wake()

    def revoke(self) -> None:
        """End the stream at once: its token was revoked."""
        self.revoked = True
        self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    async def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for something to send (or the end); False if nothing came."""
        if self.has_changes or self.closing:
            return True
        loop = asyncio.get_running_loop()
        waiter = self.waiter = loop.create_future()
        if not self.asleep:
            # Once until the next change: a quiet stream waits again every few seconds.
            self.asleep = True
            self.interest.sleepers.append(self)
        self._wait_until = loop.time() + max(0.0, seconds)
        timer = self._timer
        if timer is None or timer.when() > self._wait_until:
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(self._wait_until, self._time_is_up)
        try:
            woken = await waiter
        finally:
            self.waiter = None
        return woken or self.has_changes or self.closing

    def _time_is_up(self) -> None:
        self._timer = None
        waiter = self.waiter
        if waiter is None or waiter.done():
            return  # not waiting: the next wait sets a timer of its own
        loop = waiter.get_loop()
        if loop.time() >= self._wait_until:
            waiter.set_result(False)
        else:
            # This wait began after the timer was set, and ends later.
            self._timer = loop.call_at(self._wait_until, self._time_is_up)

    def stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class ChangeHub:
    """This process's listeners, by workspace, and one pump per workspace that has any."""

    def __init__(
        self,
        board: Board,
        *,
        revocations: RevocationList,
        per_token: int,
        queue_size: int,
        writes_per_second: int = 500,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        recheck_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_drop: Callable[[], None] = lambda: None,
    ) -> None:
        self._board = board
        self._revocations = revocations
        self._per_token = per_token
        self._queue_size = queue_size
        self._writes_per_second = writes_per_second
        self._sleep = sleep
        self._recheck_sleep = recheck_sleep
        self._on_drop = on_drop
        # Each workspace's listeners, grouped by what they hear.
        self._interests: dict[str, dict[object, Interest]] = {}
        self._pumps: dict[str, _Pump] = {}
        # What resources/list offers, in each workspace with a listener that asks for it.
        self._listings: dict[str, Listing] = {}
        self._per_token_count: dict[str, int] = {}
        self._count = 0

    async def join(
        self,
        grant: Grant,
        *,
        notes: frozenset[str],
        topics: frozenset[str] | None,
        lists: bool = False,
    ) -> Listener:
        """Register a listener; once this returns, every later write reaches its queue (and,
        with ``lists``, every later change of what resources/list offers its token)."""
        held = self._per_token_count.get(grant.token_id, 0)
        if held >= self._per_token:
            raise TooManyListeners(
                f"this token already has {held} open listeners on this gateway process",
                limit=self._per_token,
            )
        self._per_token_count[grant.token_id] = held + 1
        self._count += 1
        interests = self._interests.setdefault(grant.workspace, {})
        probe = Interest(grant, notes, topics, self._queue_size, lists=lists, on_drop=self._on_drop)
        interest = interests.setdefault(probe.key, probe)
        # From the next change on: what came before is not this listener's.
        listener = Listener(grant, interest, cursor=interest.head)
        interest.listeners[listener] = None
        pump = self._pumps.get(grant.workspace)
        if pump is None:
            pump = _Pump(asyncio.Event())
            pump.task = asyncio.create_task(self._pump(grant.workspace, pump.ready))
            pump.recheck = asyncio.create_task(self._recheck(grant.workspace))
            self._pumps[grant.workspace] = pump
        try:
            async with asyncio.timeout(_START_SECONDS):
                await pump.ready.wait()
            if lists:
                # Once the pump reads: a change it reads while the list loads is not lost.
                await self._listed(grant.workspace)
        except TimeoutError:
            self.leave(listener)
            raise Unavailable("the change log cannot be read now") from None
        except BaseException:
            self.leave(listener)
            raise
        return listener

    async def _listed(self, workspace: str) -> None:
        listing = self._listings.get(workspace)
        if listing is None:
            listing = self._listings[workspace] = Listing(self._board, workspace)
            listing.task = asyncio.create_task(listing.load())
        assert listing.task is not None
        try:
            await asyncio.shield(listing.task)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._listings.get(workspace) is listing:
                del self._listings[workspace]
            log.warning("resource list of %s: cannot load: %s", workspace, failure_reason(exc))
            raise Unavailable("the resource list cannot be read now") from None

    def leave(self, listener: Listener) -> None:
        ws = listener.grant.workspace
        interest = listener.interest
        if listener not in interest.listeners:
            return
        del interest.listeners[listener]
        listener.stop_timer()
        if listener.asleep:
            interest.sleepers.remove(listener)
        self._count -= 1
        token_id = listener.grant.token_id
        self._per_token_count[token_id] -= 1
        if not self._per_token_count[token_id]:
            del self._per_token_count[token_id]
        interests = self._interests[ws]
        if not interest.listeners:
            del interests[interest.key]
            if interest.lists and not any(i.lists for i in interests.values()):
                listing = self._listings.pop(ws, None)
                if listing is not None and listing.task is not None:
                    listing.task.cancel()
        if not interests:
            del self._interests[ws]
            pump = self._pumps.pop(ws, None)
            if pump is not None:
                pump.cancel()

    async def next_change(self, listener: Listener, *, wait_seconds: float) -> Notice | Idle | None:
        """The listener's next change; ``IDLE`` after ``wait_seconds`` without one; None once
        its stream is to end. Raises TokenRevoked when its token has been revoked."""
        deadline = time.monotonic() + wait_seconds
        while True:
            if listener.revoked:
                raise TokenRevoked("this token has been revoked")
            if await listener.wait(deadline - time.monotonic()):
                if listener.revoked:
                    raise TokenRevoked("this token has been revoked")
                taken = listener.interest.read(listener, 1)
                return taken[0] if taken else None
            if time.monotonic() >= deadline:
                return IDLE

    async def _recheck(self, workspace: str) -> None:
        """Every RECHECK_SECONDS, end the streams of this workspace whose token has been
        revoked since: one question to the revocation list for all of them, however many
        streams the process holds."""
        while True:
            await self._recheck_sleep(RECHECK_SECONDS)
            listeners = [
                listener
                for interest in self._interests.get(workspace, {}).values()
                for listener in interest.listeners
            ]
            grants = {listener.grant.token_id: listener.grant for listener in listeners}
            if not grants:
                continue
            try:
                revoked = await self._revocations.revoked_among(list(grants.values()))
            except Exception as exc:  # Redis away: no change reaches anyone meanwhile either
                log.warning(
                    "listeners of %s: revocations not checked: %s", workspace, failure_reason(exc)
                )
                continue
            for listener in listeners:
                if listener.grant.token_id in revoked:
                    listener.revoke()

    def write_interval(self) -> float:
        """The least time between two reads of the change log that found something (and so
        between two writes to one stream), for this many listeners."""
        return min(MAX_WRITE_INTERVAL_SECONDS, self._count / self._writes_per_second)

    def waiting(self, listener: Listener, *, limit: int) -> tuple[list[Notice], bool]:
        """Up to ``limit`` changes already queued for ``listener``, without waiting, and
        whether its end mark came after them (the stream is to end once they are sent)."""
        notices = listener.interest.read(listener, limit)
        return notices, listener.closing and not listener.has_changes

    async def _pump(self, workspace: str, ready: asyncio.Event) -> None:
        feed = await self._board.open_feed(workspace)
        try:
            while not ready.is_set():
                try:
                    await feed.start_now()
                    ready.set()
                except Exception as exc:
                    log.warning(
                        "change feed of %s: cannot start: %s", workspace, failure_reason(exc)
                    )
                    await asyncio.sleep(_RETRY_SECONDS)
            while True:
                try:
                    changes = await feed.next(block_ms=_BLOCK_MS, count=_READ_COUNT)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # Redis gone: listeners wait, the pump retries
                    log.warning(
                        "change feed of %s: read failed: %s", workspace, failure_reason(exc)
                    )
                    await asyncio.sleep(_RETRY_SECONDS)
                    # On a fresh connection, to wherever the workspace is now (a failover or
                    # a reshard may have moved it), from the same entry.
                    feed = await self._reopen(feed, workspace)
                    continue
                listing = self._listings.get(workspace)
                told = await listing.follow(changes) if listing is not None and changes else ()
                interests = list(self._interests.get(workspace, {}).values())
                # One list change per read is enough: a client reads the list again anyway.
                listed: set[Interest] = set()
                for n, change in enumerate(changes):
                    notice = Notice.of(change)
                    for interest in interests:
                        if interest.wants(change):
                            interest.publish(notice)
                    if told and told[n]:
                        _publish_listing(interests, change, told[n], listed)
                if changes and len(changes) < _READ_COUNT:
                    # Under a burst, one read a while carries many entries rather than one
                    # read an entry, and each stream sends them in one write.
                    await self._sleep(self.write_interval())
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(feed.close())

    async def _reopen(self, feed: ChangeFeed, workspace: str) -> ChangeFeed:
        try:
            fresh = await self._board.open_feed(workspace)
        except Exception as exc:  # the slot map is not readable yet: try again next round
            log.warning("change feed of %s: cannot reopen: %s", workspace, failure_reason(exc))
            return feed
        fresh.continue_from(feed)
        with contextlib.suppress(Exception):
            await feed.close()
        return fresh

    async def close(self) -> None:
        """Stop the pumps and end every listener's stream (the gateway is stopping)."""
        tasks = [t for p in self._pumps.values() for t in (p.task, p.recheck) if t is not None]
        self._pumps.clear()
        for listing in self._listings.values():
            if listing.task is not None:
                listing.task.cancel()
        self._listings.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for interests in self._interests.values():
            for interest in interests.values():
                for listener in interest.listeners:
                    listener.close()


def _publish_listing(
    interests: list[Interest],
    change: Change,
    entries: tuple[ListEntry, ...],
    told: set[Interest],
) -> None:
    notice: Notice | None = None
    for interest in interests:
        if interest not in told and interest.hears_listing(entries):
            notice = notice or Notice.listed(change)
            interest.publish(notice)
            told.add(interest)


@dataclass
class _Pump:
    """A workspace's reader of the change log, and its check of the listeners' tokens."""

    ready: asyncio.Event
    task: asyncio.Task[None] | None = None
    recheck: asyncio.Task[None] | None = None

    def cancel(self) -> None:
        for task in (self.task, self.recheck):
            if task is not None:
                task.cancel()
