"""Is a recorded history of one note linearizable, as a versioned register with compare-and-swap
and append?

A history is what clients saw: each operation's invocation and completion times and its
outcome. It is linearizable when the operations can be put in one order that respects real
time (an operation that completed before another was invoked comes first) and in which each
outcome is what the register gives at that point. The model:

- state: the note's version (0: no note) and its content (the body as a read shows it);
- a write with ``expect_version`` e applies when the version is e (or always, without one),
  making version + 1 with its content; answered ``ok`` with that version, or ``conflict``
  with ``current_version`` the version at that point (``yours``: that version is this very
  write's content, one past e);
- an append applies always, making version + 1 with the text added to the content;
- a read answers the version and content at its point.

An operation whose outcome is unknown (an error, a timeout, a cut connection) may take effect
at any point after its invocation, or never: it is placed only where it applies, and may be
left out. A read whose outcome is unknown constrains nothing and is dropped.

The search is Wing and Gong's, with Lowe's just-in-time pruning: at each step only an
operation invoked before the earliest completion still pending may come next, and a
(linearized set, state) pair already explored is not explored again. Versions only grow, so a
write of unknown outcome can apply at one point at most, which keeps the search small.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["write", "append", "read"]
Outcome = Literal["ok", "conflict", "unknown"]


@dataclass(frozen=True)
class Operation:
    """One call as its client saw it; ``completed`` is None when its outcome is unknown."""

    client: str
    note: str
    kind: Kind
    invoked: float
    completed: float | None
    outcome: Outcome
    expect_version: int | None = None  # a write's
    content: str | None = None  # a write's body, or an append's text
    version: int | None = None  # ok: written or read; conflict: the current version it named
    seen: str | None = None  # a read's body (None: the note did not exist)
    yours: bool = False  # a conflict that said the current version is this write

    def describe(self) -> str:
        done = "?" if self.completed is None else f"{self.completed:.4f}"
        what = {
            "write": f"write(expect={self.expect_version}, {self.content!r})",
            "append": f"append({self.content!r})",
            "read": "read",
        }[self.kind]
        said: str = self.outcome
        if self.outcome != "unknown":
            said += f" v{self.version}"
        if self.kind == "read" and self.outcome == "ok":
            said += f" {self.seen!r}"
        return f"{self.client} {what} [{self.invoked:.4f}, {done}] -> {said}"


@dataclass(frozen=True)
class State:
    version: int = 0
    content: str | None = None


@dataclass(frozen=True)
class Verdict:
    """The check of one note's history."""

    note: str
    operations: int
    unknown: int
    linearizable: bool
    # When not: the operation no order could place, and the furthest any order got.
    stuck_at: Operation | None = None
    furthest: State | None = None

    def explain(self) -> str:
        if self.linearizable:
            return f"{self.note}: {self.operations} operations, linearizable"
        assert self.stuck_at is not None and self.furthest is not None
        return (
            f"{self.note}: not linearizable: no order of the operations explains "
            f"{self.stuck_at.describe()}; the furthest order reached version "
            f"{self.furthest.version} with content {self.furthest.content!r}"
        )


def step(state: State, op: Operation) -> State | None:
    """The state after ``op`` at ``state``, or None when ``op`` cannot be placed there."""
    if op.kind == "read":
        if op.version == state.version and op.seen == state.content:
            return state
        return None
    if op.kind == "append":
        after = State(state.version + 1, (state.content or "") + (op.content or ""))
        if op.outcome == "unknown" or op.version == after.version:
            return after
        return None
    applies = op.expect_version is None or op.expect_version == state.version
    if op.outcome == "conflict":
        if applies or op.version != state.version:
            return None
        if op.yours and not (
            op.expect_version is not None
            and state.version == op.expect_version + 1
            and state.content == op.content
        ):
            return None
        return state
    if not applies:
        return None
    after = State(state.version + 1, op.content)
    if op.outcome == "unknown" or op.version == after.version:
        return after
    return None


def _settled(history: Sequence[Operation]) -> tuple[list[Operation], str | None]:
    """``history`` without what cannot matter, and the final content where it orders appends.

    Reads of unknown outcome are dropped. An append of unknown outcome may be placed anywhere
    after its invocation, and each one multiplies what the search must try between two reads.
    Where appends carry distinct texts and a read was made after every other operation ended,
    that read's content holds every append that landed since the last write that replaced
    the content: an unknown append with no such write after it, whose text the final read
    does not hold, never landed. And where every such write came before the first append,
    the final content is the appends in the order they took effect: an append can only be
    placed where the content it makes begins the final content."""
    ops = [op for op in history if not (op.kind == "read" and op.outcome == "unknown")]
    appends = [op.content for op in ops if op.kind == "append"]
    reads = [op for op in ops if op.kind == "read"]
    if not reads or len(set(appends)) != len(appends):
        return ops, None
    final = max(reads, key=lambda op: op.invoked)
    others = [op for op in ops if op is not final]
    if any(
        op.completed is None or op.completed >= final.invoked
        for op in others
        if op.kind != "append" or op.outcome != "unknown"
    ):
        return ops, None
    content = final.seen or ""
    writes = [op for op in ops if op.kind == "write" and op.outcome != "conflict"]
    replacing = [op.invoked for op in writes]

    def never_landed(op: Operation) -> bool:
        return (
            op.kind == "append"
            and op.outcome == "unknown"
            and op.invoked < final.invoked
            and not any(t > op.invoked for t in replacing)
            and (op.content or "") not in content
        )

    first_append = min((op.invoked for op in ops if op.kind == "append"), default=math.inf)
    ordered = all(op.completed is not None and op.completed < first_append for op in writes)
    return [op for op in ops if not never_landed(op)], content if ordered else None


def check_note(note: str, history: Sequence[Operation]) -> Verdict:
    """Whether one note's ``history`` is linearizable (see the module's docstring)."""
    settled, final_content = _settled(history)
    ops = sorted(settled, key=lambda op: op.invoked)
    unknown = sum(op.outcome == "unknown" for op in history)
    by_completion = sorted(range(len(ops)), key=lambda i: _done(ops[i]))
    required = 0
    for i, op in enumerate(ops):
        if op.completed is not None:
            required |= 1 << i
    start = State()
    seen: set[tuple[int, State]] = set()

    def lowest_unplaced(mask: int) -> int:
        return (~mask & (mask + 1)).bit_length() - 1

    # The deepest point reached, for the report: (linearized count, state, blocking op).
    furthest = (-1, start, ops[by_completion[0]] if ops else None)
    stack: list[tuple[int, State]] = [(0, start)]
    while stack:
        mask, state = stack.pop()
        if mask & required == required:
            return Verdict(note, len(ops), unknown, True)
        if (mask, state) in seen:
            continue
        seen.add((mask, state))
        # The earliest completion still pending: whatever is placed next was invoked before it.
        first_pending = next(i for i in by_completion if not mask >> i & 1)
        deadline = _done(ops[first_pending])
        placed = bin(mask).count("1")
        if placed > furthest[0]:
            furthest = (placed, state, ops[first_pending])
        nexts: list[tuple[int, State]] = []
        for i in range(lowest_unplaced(mask), len(ops)):
            op = ops[i]
            if op.invoked >= deadline:
                break
            if mask >> i & 1:
                continue
            after = step(state, op)
            if after is None:
                continue
            if (
                op.kind == "append"
                and final_content is not None
                and not final_content.startswith(after.content or "")
            ):
                continue
            if after is state:
                # A read or a conflict that fits here changes nothing: placing it now loses
                # no order (it may come first: nothing pending ended before it began), and
                # trying the concurrent ones in every order would make the search exponential.
                nexts = [(mask | 1 << i, state)]
                break
            nexts.append((mask | 1 << i, after))
        # The earliest invoked is tried first (the stack's top).
        stack.extend(reversed(nexts))
    _, state, blocking = furthest
    return Verdict(note, len(ops), unknown, False, stuck_at=blocking, furthest=state)


def check_history(history: Iterable[Operation]) -> list[Verdict]:
    """Each note's verdict; notes are independent registers, so each is checked alone."""
    by_note: dict[str, list[Operation]] = defaultdict(list)
    for op in history:
        by_note[op.note].append(op)
    return [check_note(note, ops) for note, ops in sorted(by_note.items())]


def _done(op: Operation) -> float:
    return math.inf if op.completed is None else op.completed
