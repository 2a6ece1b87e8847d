"""The one way the store runs WATCH/MULTI/EXEC.

redis-py's own ``transaction()`` helper retries forever on WatchError; under heavy contention
that turns into a livelock with no signal to the caller. Here retries are bounded, with a
short jittered back-off, and exhaustion raises ``Contended``.

A transaction runs on a ``WireConnection`` (store/connection/_wire.py) lent by the board's pool
(``BoardClient.transaction``, store/connection/_board_client.py), not
through redis-py's ``Pipeline``: under a compare-and-swap write load the Pipeline's own
bookkeeping, and then redis-py's per-reply reads, cost more of the gateway's CPU than the
bytes sent. What remains per write is two round trips, each one write and one wake-up:

1. ``WATCH`` and the body's first reads (``first_reads``), and a ``Gate`` if the caller has
   one, in one packet. Redis runs a connection's commands in order, so the reads happen after
   the WATCH, and anything that changes the keys after them fails the EXEC.
2. ``MULTI``, the queued writes and ``EXEC`` in one packet (and ``WAIT`` after it, with
   ``ReplicaWait``: a committed transaction is acknowledged only once that many replicas
   have it; otherwise ``Unconfirmed``, the write may survive or be lost).

Scripts go by hash (store/connection/_scripts.py): in the first round trip always; in the
second only when the MULTI holds one script and nothing else, so that a Redis without it
runs nothing of the EXEC. The script is then loaded, and the transaction runs again with its
text (so at most once a call), without counting that run against ``max_retries``.

A refused body (a stale ``expect_version``) sends ``UNWATCH`` before the connection goes back
to the pool. Any failure in the middle of a round trip closes the connection (the wire does
that itself), so no later caller can read a reply meant for this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from redis.exceptions import RedisError, WatchError

from .._errors import Contended, Unconfirmed
from ._pool import WaitingConnectionPool
from ._redis_errors import mapped_redis_errors
from ._scripts import Command, all_by_hash, load, missed
from ._wire import WireConnection, pack

T = TypeVar("T")


class _ScriptNotLoaded(Exception):
    """EXEC ran nothing: its one script is not loaded in this Redis."""


@dataclass(frozen=True)
class ReplicaWait:
    """Acknowledge a write once ``replicas`` replicas have it, waiting at most ``timeout_ms``."""

    replicas: int
    timeout_ms: int


@dataclass(frozen=True)
class Gate:
    """A check that rides a write's first round trip, judged before the body runs.

    ``command`` runs once, on the first attempt only (a retry after a lost race does not run
    it again); ``judge`` gets its reply and raises to refuse the call, in which case nothing
    is written and nothing read is returned. The command must touch only keys in the same
    hash slot as the watched ones.
    """

    command: Command
    judge: Callable[[Any], None]


class Transaction:
    """One WATCH..EXEC on one connection: reads while watching, then queued writes.

    The body reads with ``read`` (each a round trip, raw replies) and may ``watch`` more keys;
    ``multi`` starts the queued part, and ``queue`` adds a command to it. Replies are what
    hiredis parses (bytes, ints, lists, None), without redis-py's per-command response
    callbacks.
    """

    def __init__(self, wire: WireConnection) -> None:
        self._wire = wire
        self._queued: list[Command] = []
        self._in_multi = False

    @property
    def in_multi(self) -> bool:
        return self._in_multi

    @property
    def queued(self) -> list[Command]:
        return self._queued

    async def read(self, *command: Any) -> Any:
        """Run one command now, under the WATCH, and return its reply."""
        (reply,) = await self._wire.round_trip(pack([command]), 1)
        return _raise_error(reply)

    async def watch(self, *names: str) -> None:
        await self.read("WATCH", *names)

    def multi(self) -> None:
        self._in_multi = True

    def queue(self, *command: Any) -> None:
        if not self._in_multi:
            raise RuntimeError("queue() before multi(): the write would run outside EXEC")
        self._queued.append(command)

    def judge_first(self, replies: list[Any], gate: Gate | None) -> list[Any]:
        """The replies to ``first_commands``: the gate judged, errors raised; those of the reads."""
        _raise_error(replies[0])
        if gate is not None:
            gate.judge(_raise_error(replies[-1]))
            replies = replies[:-1]
        return [_raise_error(reply) for reply in replies[1:]]

    async def execute(self, wait: ReplicaWait | None, *, by_hash: bool = True) -> list[Any]:
        """MULTI, the queued commands and EXEC (and WAIT) in one round trip; EXEC's replies.

        Raises ``WatchError`` when a watched key changed (EXEC answered nil).
        """
        queued = self._queued
        # A lone script goes by hash: if Redis lacks it, nothing of the EXEC runs.
        if by_hash and len(queued) == 1:
            queued = all_by_hash(queued)
        commands: list[Command] = [("MULTI",), *queued, ("EXEC",)]
        if wait is not None:
            commands.append(("WAIT", wait.replicas, wait.timeout_ms))
        replies = await self._wire.round_trip(pack(commands), len(commands))
        # A command refused while queueing (QUEUED's place holds its error) aborts the EXEC.
        for reply in replies[: len(self._queued) + 1]:
            _raise_error(reply)
        executed = replies[len(self._queued) + 1]
        if executed is None:
            raise WatchError("a watched key changed before EXEC")
        _raise_error(executed)
        if queued is not self._queued and missed(executed):
            raise _ScriptNotLoaded
        for reply in executed:
            _raise_error(reply)
        if wait is not None:
            acked = int(_raise_error(replies[-1]))
            if acked < wait.replicas:
                raise Unconfirmed(
                    f"the write committed on the primary but reached {acked} of "
                    f"{wait.replicas} replicas within {wait.timeout_ms} ms"
                )
        return list(executed)

    async def unwatch(self) -> None:
        await self.read("UNWATCH")


def first_commands(
    watch: Sequence[str], reads: Sequence[Command], gate: Gate | None
) -> list[Command]:
    """WATCH, ``reads`` and the gate's command: a transaction's first round trip."""
    commands: list[Command] = [("WATCH", *watch), *reads]
    if gate is not None:
        commands.append(gate.command)
    return commands


def _raise_error(reply: Any) -> Any:
    # Every error reply, not only ResponseError's kind: redis-py names some by what they
    # mean for a connection (``-LOADING`` is a BusyLoadingError, a ConnectionError).
    if isinstance(reply, RedisError):
        raise reply
    return reply


# The body gets the replies to ``first_reads`` and may read more under WATCH; then it calls
# ``tx.multi()``, queues its writes and returns a function that turns EXEC's replies into the
# result. Returning without ``multi()`` means nothing is written.
TransactionBody = Callable[[Transaction, list[Any]], Awaitable[Callable[[list[Any]], T]]]


async def run_transaction(
    pool: WaitingConnectionPool,
    watch: Sequence[str],
    body: TransactionBody[T],
    *,
    timeout_seconds: float,
    max_retries: int,
    first_reads: Sequence[Command] = (),
    gate: Gate | None = None,
    wait: ReplicaWait | None = None,
) -> T:
    """Run ``body`` until EXEC succeeds, at most ``max_retries + 1`` times, all within one
    operation's ``timeout_seconds``."""
    async with mapped_redis_errors(timeout_seconds):
        attempt = 0
        by_hash = True
        while attempt <= max_retries:
            gated = gate if attempt == 0 else None
            commands = first_commands(watch, first_reads, gated)
            wire, replies = await pool.lend_answered(commands)
            tx = Transaction(wire)
            try:
                try:
                    finish = await body(tx, tx.judge_first(replies, gated))
                except BaseException:
                    # Refused (by the gate or the body) with every reply read: leave nothing
                    # watched. A failure mid-read has already closed the connection.
                    if wire.is_connected:
                        with contextlib.suppress(RedisError, OSError):
                            await tx.unwatch()
                    raise
                if not tx.in_multi:
                    await tx.unwatch()
                    return finish([])
                return finish(await tx.execute(wait, by_hash=by_hash))
            except _ScriptNotLoaded:
                # Nothing ran, and EXEC dropped the WATCH: load the script for the calls to
                # come, and run again with its text, so that this happens once a call at most.
                # Not a lost race: the gate, judged already, does not run again either way.
                await load(wire, tx.queued)
                by_hash = False
                gate = None
                continue
            except WatchError:
                # Another client touched a watched key between our read and EXEC; EXEC
                # itself has dropped the WATCH.
                pass
            finally:
                pool.return_wire(wire)
            await asyncio.sleep(random.uniform(0, 0.001 * 2 ** min(attempt, 8)))
            attempt += 1
    raise Contended(f"the write lost {max_retries + 1} races in a row to other writers")
