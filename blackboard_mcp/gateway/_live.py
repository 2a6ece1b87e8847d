"""Change notifications: one blocking read of the change log per active workspace in this
process, fanned out to the process's listeners.

A write reaches every gateway process through Redis: whichever process committed it, the
change log has its entry, and each process with a listener in that workspace is blocked in
XREAD on it. A listener sees only entries of topics its token may read, and only those its
subscriptions ask for. Each listener has a bounded queue: one that does not keep up is
dropped (its stream ends with an error, the client re-listens and refetches) and never
slows the pump or the other listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from blackboard_mcp.auth import Grant, RevocationList, TokenRevoked
from blackboard_mcp.store import Board, Change, ChangeFeed, Unavailable, failure_reason

from ._errors import GatewayError

log = logging.getLogger(__name__)

# How long one XREAD blocks before the pump looks again at whether anyone still listens.
_BLOCK_MS = 5000
# After a failed read (Redis down), wait before the next so a dead Redis is not spun on.
_RETRY_SECONDS = 1.0
# An open stream's token is checked against the revocation list at most this often, so a
# revoked token stops hearing of changes within about this long.
RECHECK_SECONDS = 5.0
# A listen that cannot start its workspace's feed (Redis down) is refused after this long.
_START_SECONDS = 5.0


class TooManyListeners(GatewayError):
    """The token already holds its limit of open listeners in this process."""

    code = "rate_limited"
    hint = "close a listener first (BB_LISTENERS_PER_TOKEN bounds them per token)"


class ListenerDropped(GatewayError):
    """The listener did not read its events fast enough and was dropped."""

    code = "overloaded"
    hint = "re-listen, then refetch what you follow (list_keys with cursor)"


class Idle(enum.Enum):
    IDLE = "idle"


IDLE = Idle.IDLE


@dataclass(frozen=True, slots=True)
class Notice:
    """A change as every listener that hears it is sent it.

    ``uri_json`` is the change's part of a notification, JSON-encoded once by the pump for
    all of this process's listeners; each stream adds only its own subscription id.
    """

    change: Change
    uri_json: bytes

    @classmethod
    def of(cls, change: Change) -> Notice:
        return cls(change, orjson.dumps(change.uri))


@dataclass(eq=False)
class Listener:
    """One open subscription: what it follows and its queue of changes not yet sent."""

    grant: Grant
    notes: frozenset[str]
    # None: every topic the token may read.
    topics: frozenset[str] | None
    queue: asyncio.Queue[Notice | None]
    on_drop: Callable[[], None] = field(default=lambda: None)
    dropped: bool = False
    checked_at: float = field(default_factory=time.monotonic)

    def wants(self, change: Change) -> bool:
        if not self.grant.can_read(change.topic):
            return False
        if self.topics is None:
            return True
        return change.topic in self.topics or change.uri in self.notes

    def offer(self, notice: Notice) -> None:
        if self.dropped or not self.wants(notice.change):
            return
        try:
            self.queue.put_nowait(notice)
        except asyncio.QueueFull:
            self.dropped = True
            log.warning(
                "listener of %s in %s dropped (overloaded): %d changes waiting",
                self.grant.subject,
                self.grant.workspace,
                self.queue.maxsize,
            )
            self.on_drop()

    def close(self) -> None:
        """End the stream after what is queued (None is the end mark)."""
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(None)


class ChangeHub:
    """This process's listeners, by workspace, and one pump per workspace that has any."""

    def __init__(
        self,
        board: Board,
        *,
        revocations: RevocationList,
        per_token: int,
        queue_size: int,
    ) -> None:
        self._board = board
        self._revocations = revocations
        self._per_token = per_token
        self._queue_size = queue_size
        self._listeners: dict[str, set[Listener]] = {}
        self._pumps: dict[str, _Pump] = {}
        self._per_token_count: dict[str, int] = {}

    async def join(
        self, grant: Grant, *, notes: frozenset[str], topics: frozenset[str] | None
    ) -> Listener:
        """Register a listener; once this returns, every later write reaches its queue."""
        held = self._per_token_count.get(grant.token_id, 0)
        if held >= self._per_token:
            raise TooManyListeners(
                f"this token already has {held} open listeners on this gateway process",
                limit=self._per_token,
            )
        listener = Listener(grant, notes, topics, asyncio.Queue(self._queue_size))
        self._per_token_count[grant.token_id] = held + 1
        self._listeners.setdefault(grant.workspace, set()).add(listener)
        pump = self._pumps.get(grant.workspace)
        if pump is None:
            pump = _Pump(asyncio.Event())
            pump.task = asyncio.create_task(self._pump(grant.workspace, pump.ready))
            self._pumps[grant.workspace] = pump
        try:
            async with asyncio.timeout(_START_SECONDS):
                await pump.ready.wait()
        except TimeoutError:
            self.leave(listener)
            raise Unavailable("the change log cannot be read now") from None
        except BaseException:
            self.leave(listener)
            raise
        return listener

    def leave(self, listener: Listener) -> None:
        ws = listener.grant.workspace
        group = self._listeners.get(ws)
        if group is None or listener not in group:
            return
        group.discard(listener)
        token_id = listener.grant.token_id
        self._per_token_count[token_id] -= 1
        if not self._per_token_count[token_id]:
            del self._per_token_count[token_id]
        if not group:
            del self._listeners[ws]
            pump = self._pumps.pop(ws, None)
            if pump is not None and pump.task is not None:
                pump.task.cancel()

    async def next_change(self, listener: Listener, *, wait_seconds: float) -> Notice | Idle | None:
        """The listener's next change; ``IDLE`` after ``wait_seconds`` without one; None once
        its stream is to end. Raises TokenRevoked when its token has been revoked."""
        deadline = time.monotonic() + wait_seconds
        while True:
            step = min(RECHECK_SECONDS, deadline - time.monotonic())
            change: Notice | Idle | None
            try:
                async with asyncio.timeout(max(0.0, step)):
                    change = await listener.queue.get()
            except TimeoutError:
                change = IDLE
            now = time.monotonic()
            if now - listener.checked_at >= RECHECK_SECONDS:
                listener.checked_at = now
                try:
                    revoked = await self._revocations.is_revoked(listener.grant)
                except Exception:  # Redis away: no change reaches anyone meanwhile either
                    revoked = False
                if revoked:
                    raise TokenRevoked("this token has been revoked")
            if change is not IDLE or now >= deadline:
                return change

    def waiting(self, listener: Listener, *, limit: int) -> tuple[list[Notice], bool]:
        """Up to ``limit`` changes already queued for ``listener``, without waiting, and
        whether its end mark came after them (the stream is to end once they are sent)."""
        notices: list[Notice] = []
        while len(notices) < limit:
            try:
                notice = listener.queue.get_nowait()
            except asyncio.QueueEmpty:
                return notices, False
            if notice is None:
                return notices, True
            notices.append(notice)
        return notices, False

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
                    changes = await feed.next(block_ms=_BLOCK_MS)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # Redis gone: listeners wait, the pump retries
                    log.warning(
                        "change feed of %s: read failed: %s", workspace, failure_reason(exc)
                    )
                    await asyncio.sleep(_RETRY_SECONDS)
                    if self._board.is_cluster:
                        # A failover or a reshard moves the workspace to another primary:
                        # read on there, from the same entry.
                        feed = await self._reopen(feed, workspace)
                    continue
                for change in changes:
                    notice = Notice.of(change)
                    for listener in list(self._listeners.get(workspace, ())):
                        listener.offer(notice)
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
        tasks = [p.task for p in self._pumps.values() if p.task is not None]
        self._pumps.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for group in self._listeners.values():
            for listener in group:
                listener.close()


@dataclass
class _Pump:
    ready: asyncio.Event
    task: asyncio.Task[None] | None = None
