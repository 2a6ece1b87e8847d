"""A Redis connection pool that waits, bounded and in arrival order, for a free connection.

redis-py's plain pool raises ``MaxConnectionsError`` the moment its connections are all
lent out, so a busy but healthy gateway answered `unavailable`. Its
``BlockingConnectionPool`` waits, but not in order: measured here with 200 tasks on 64
connections, one GET waited 18.9 s while the others went by, and its
throughput was lower than the plain pool's. This pool puts an ``asyncio.Semaphore`` (which
wakes waiters first come, first served) in front of the plain pool, at the plain pool's
speed; a wait past its bound raises ``MaxConnectionsError``, which redis-py defines as pool
exhaustion rather than a connection failure, and the store maps to ``Overloaded``.

The pool lends two kinds of connection under the one bound: ``WireConnection``s
(store/connection/_wire.py) for transactions, the reads of get_state and list_keys and the audit
batch, and redis-py's for every other command.
``max_connections`` bounds the connections lent at once, of both kinds together; each kind
keeps its idle connections open for the next caller, so up to twice that many sockets may
be open to this Redis. How the slots hook into redis-py's own lending is in
store/connection/_redis_py_adapter.py (``SlotBoundPool``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8

from ._redis_errors import deadline_hit_in_pool
from ._redis_py_adapter import SlotBoundPool, pool_settings
from ._scripts import Command, all_by_hash, completed
from ._wire import WireClosed, WireConnection, Wires, first_error, open_wire, pack


class WaitingConnectionPool(SlotBoundPool):
    """At most ``max_connections`` connections; a caller waits up to ``wait_seconds`` for one."""

    def __init__(
        self,
        *,
        wait_seconds: float,
        wire_class: type[WireConnection] = WireConnection,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._wait_seconds = wait_seconds
        self._wire_class = wire_class
        self.forget_slots()

    def forget_slots(self) -> None:
        # The base class forgets the connections it lent; their slots go with them.
        self._free = asyncio.Semaphore(self.max_connections)
        self._wires = Wires()

    def close_own_connections(self) -> None:
        self._wires.close_all()

    async def lend_wire(self, *, fresh: bool = False) -> WireConnection:
        """A wire: an idle one (unless ``fresh``) or a new one. Give it back with
        ``return_wire``."""
        await self.take_slot()
        try:
            wire = None if fresh else self._wires.take()
            if wire is None:
                connection_class, settings = pool_settings(self)
                wire = await open_wire(self._wire_class, connection_class, settings)
                self._wires.lent(wire)
            return wire
        except BaseException:
            self._free.release()
            raise

    async def lend_answered(
        self, commands: Sequence[Command], *, repeatable: bool = True
    ) -> tuple[WireConnection, list[Any]]:
        """A lent wire that has sent ``commands``, and their raw replies (errors as values).

        Scripts go by hash (store/connection/_scripts.py): one Redis has not loaded is loaded
        and run in one more round trip, on the same wire.

        An idle wire that Redis closed before this process noticed (a restart, its idle
        timeout) fails: the commands go once more, on a new wire, when nothing had been sent
        on the closed one, or when they are ``repeatable`` (reads, WATCH). A write that was
        sent is never sent again: its connection may have been cut after Redis ran it, and a
        second run would apply it twice. Its caller hears the connection error (``unavailable``:
        an outcome it cannot know). The caller gives the wire back with ``return_wire``.
        """
        packed = pack(all_by_hash(commands))
        wire = await self.lend_wire()
        try:
            replies = await wire.round_trip(packed, len(commands))
        except WireClosed:
            self.return_wire(wire)
        except RedisConnectionError:
            self.return_wire(wire)
            if not repeatable:
                raise
        except BaseException:
            self.return_wire(wire)
            raise
        else:
            return wire, await self._completed(wire, commands, replies)
        wire = await self.lend_wire(fresh=True)
        try:
            replies = await wire.round_trip(packed, len(commands))
        except BaseException:
            self.return_wire(wire)
            raise
        return wire, await self._completed(wire, commands, replies)

    async def _completed(
        self, wire: WireConnection, commands: Sequence[Command], replies: list[Any]
    ) -> list[Any]:
        try:
            return await completed(wire, commands, replies)
        except BaseException:
            self.return_wire(wire)
            raise

    async def round_trip(
        self, commands: Sequence[Command], *, repeatable: bool = True
    ) -> list[Any]:
        """Plain commands (no WATCH, no MULTI) in one round trip on a lent wire; their replies.

        ``repeatable``: whether the commands may run twice (see ``lend_answered``). Raises
        the first error reply.
        """
        wire, replies = await self.lend_answered(commands, repeatable=repeatable)
        self.return_wire(wire)
        return first_error(replies)

    def return_wire(self, wire: WireConnection) -> None:
        """Give back a lent wire; a closed one is dropped, and its slot freed either way."""
        if self._wires.give_back(wire):
            self._free.release()

    async def take_slot(self) -> None:
        if self._free.locked():
            # Only a call that has to wait pays for a timer.
            await self._wait_for_slot()
        else:
            await self._free.acquire()  # a free slot: taken without suspending

    def free_slot(self) -> None:
        self._free.release()

    async def _wait_for_slot(self) -> None:
        try:
            async with asyncio.timeout(self._wait_seconds):
                await self._free.acquire()
        except TimeoutError as exc:
            raise MaxConnectionsError(
                f"no Redis connection came free within {self._wait_seconds:g} s"
            ) from exc
        except asyncio.CancelledError:
            # The operation's own deadline (store/connection/_redis_errors.py) may run out first: it
            # says `overloaded`, not `unavailable`, when the time went on waiting here.
            deadline_hit_in_pool.set(True)
            raise
