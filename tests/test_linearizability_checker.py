"""The history checker (``blackboard_mcp.testing.check_note``) on histories made by hand: it
accepts what a versioned register with compare-and-swap and append allows, and finds each kind
of anomaly the board must never show."""

from __future__ import annotations

import pytest

from blackboard_mcp.testing import Operation, check_history, check_note

NOTE = "bb://ws/t/n"


def write(
    client: str,
    invoked: float,
    completed: float | None,
    *,
    expect: int | None,
    content: str,
    outcome: str = "ok",
    version: int | None = None,
    yours: bool = False,
) -> Operation:
    return Operation(
        client,
        NOTE,
        "write",
        invoked,
        completed,
        outcome,  # type: ignore[arg-type]
        expect_version=expect,
        content=content,
        version=version,
        yours=yours,
    )


def append(
    client: str, invoked: float, completed: float | None, text: str, version: int | None = None
) -> Operation:
    outcome = "unknown" if completed is None else "ok"
    return Operation(
        client, NOTE, "append", invoked, completed, outcome, content=text, version=version
    )


def read(
    client: str, invoked: float, completed: float, version: int, seen: str | None
) -> Operation:
    return Operation(client, NOTE, "read", invoked, completed, "ok", version=version, seen=seen)


def linearizable(*ops: Operation) -> bool:
    return check_note(NOTE, ops).linearizable


# ---------------------------------------------------------------- accepted


def test_an_empty_history_and_a_read_of_no_note_are_linearizable() -> None:
    assert linearizable()
    assert linearizable(read("a", 0, 1, 0, None))


def test_sequential_writes_and_reads_are_linearizable() -> None:
    assert linearizable(
        write("a", 0, 1, expect=0, content="x", version=1),
        read("b", 2, 3, 1, "x"),
        write("b", 4, 5, expect=1, content="y", version=2),
        read("a", 6, 7, 2, "y"),
    )


def test_concurrent_compare_and_swap_one_wins_one_conflicts() -> None:
    assert linearizable(
        write("a", 0, 1, expect=0, content="x", version=1),
        write("a", 2, 5, expect=1, content="from a", version=2),
        write("b", 2.5, 4, expect=1, content="from b", outcome="conflict", version=2),
        read("c", 6, 7, 2, "from a"),
    )


def test_a_read_overlapping_a_write_may_see_either_side() -> None:
    base = [write("a", 0, 1, expect=0, content="x", version=1)]
    overlapping = write("a", 2, 5, expect=1, content="y", version=2)
    assert linearizable(*base, overlapping, read("b", 3, 4, 1, "x"))
    assert linearizable(*base, overlapping, read("b", 3, 4, 2, "y"))


def test_appends_add_up_in_some_order() -> None:
    assert linearizable(
        write("a", 0, 1, expect=0, content="log:", version=1),
        append("a", 2, 5, "A", version=3),
        append("b", 2, 5, "B", version=2),
        read("c", 6, 7, 3, "log:BA"),
    )


def test_a_write_of_unknown_outcome_that_shows_up_later_is_allowed() -> None:
    assert linearizable(
        write("a", 0, 1, expect=0, content="x", version=1),
        write("a", 2, None, expect=1, content="y", outcome="unknown"),
        read("b", 10, 11, 2, "y"),
    )


def test_a_write_of_unknown_outcome_that_never_shows_up_is_allowed() -> None:
    assert linearizable(
        write("a", 0, 1, expect=0, content="x", version=1),
        write("a", 2, None, expect=1, content="y", outcome="unknown"),
        read("b", 10, 11, 1, "x"),
        write("b", 12, 13, expect=1, content="z", version=2),
    )


def test_an_append_of_unknown_outcome_applied_once_is_allowed() -> None:
    assert linearizable(
        write("a", 0, 1, expect=0, content="log:", version=1),
        append("a", 2, None, "A"),
        read("b", 10, 11, 2, "log:A"),
    )


def test_a_retry_told_yours_is_linearizable_only_behind_its_own_write() -> None:
    landed = write("a", 2, None, expect=1, content="y", outcome="unknown")
    retried = write("a", 5, 6, expect=1, content="y", outcome="conflict", version=2, yours=True)
    first = write("a", 0, 1, expect=0, content="x", version=1)
    assert linearizable(first, landed, retried)
    someone_else = write("b", 2, 3, expect=1, content="z", version=2)
    assert not linearizable(first, someone_else, retried)


# ---------------------------------------------------------------- anomalies


def test_a_lost_acknowledged_write_is_found() -> None:
    verdict = check_note(
        NOTE,
        [
            write("a", 0, 1, expect=0, content="x", version=1),
            write("a", 2, 3, expect=1, content="y", version=2),
            read("b", 4, 5, 1, "x"),
        ],
    )
    assert not verdict.linearizable
    assert verdict.stuck_at is not None and verdict.stuck_at.kind == "read"
    assert "not linearizable" in verdict.explain()


def test_a_stale_read_after_an_acknowledged_write_is_found() -> None:
    assert not linearizable(
        write("a", 0, 1, expect=0, content="x", version=1),
        write("a", 2, 3, expect=1, content="y", version=2),
        read("b", 4, 5, 2, "y"),
        read("c", 6, 7, 1, "x"),
    )


def test_a_torn_read_of_one_version_with_another_versions_content_is_found() -> None:
    # The field of version 2 with the body of version 3, though both writes overlap the read.
    assert not linearizable(
        write("a", 0, 1, expect=0, content="b1", version=1),
        write("a", 2, 3, expect=1, content="b2", version=2),
        write("a", 4, 9, expect=2, content="b3", version=3),
        read("b", 5, 8, 2, "b3"),
    )


def test_an_append_applied_twice_is_found() -> None:
    assert not linearizable(
        write("a", 0, 1, expect=0, content="log:", version=1),
        append("a", 2, 3, "A", version=2),
        read("b", 4, 5, 3, "log:AA"),
    )


def test_two_acknowledged_writes_at_one_version_are_found() -> None:
    assert not linearizable(
        write("a", 0, 1, expect=0, content="x", version=1),
        write("a", 2, 3, expect=1, content="from a", version=2),
        write("b", 2, 3, expect=1, content="from b", version=2),
    )


def test_a_conflict_naming_a_version_that_never_was_is_found() -> None:
    assert not linearizable(
        write("a", 0, 1, expect=0, content="x", version=1),
        write("b", 2, 3, expect=0, content="y", outcome="conflict", version=5),
    )


def test_real_time_order_is_kept() -> None:
    # The read completed before the write was invoked, so it cannot see it.
    assert not linearizable(
        read("b", 0, 1, 1, "x"),
        write("a", 2, 3, expect=0, content="x", version=1),
    )


@pytest.mark.parametrize("clients", [4, 16])
def test_a_long_contended_history_is_checked_quickly(clients: int) -> None:
    # Rounds of every client writing from the same version, one winning; bounded search.
    ops: list[Operation] = []
    t = 0.0
    for version in range(60):
        for c in range(clients):
            won = c == 0
            ops.append(
                write(
                    f"c{c}",
                    t + c * 0.001,
                    t + 1 + c * 0.001,
                    expect=version,
                    content=f"r{t}",
                    outcome="ok" if won else "conflict",
                    version=version + 1,
                )
            )
        ops.append(read("r", t + 2, t + 3, version + 1, f"r{t}"))
        t += 4
    [verdict] = check_history(ops)
    assert verdict.linearizable and verdict.operations == len(ops)


def test_appends_out_of_real_time_order_in_the_final_content_are_found() -> None:
    assert not linearizable(
        write("a", 0, 1, expect=0, content="log:", version=1),
        append("a", 2, 3, "A1", version=2),
        append("b", 4, 5, "A2", version=3),
        read("c", 6, 7, 3, "log:A2A1"),
    )


def test_many_appends_of_unknown_outcome_are_checked_quickly() -> None:
    # Forty clients gave up on their appends; all but the odd ones landed, in some order.
    ops = [write("a", 0, 1, expect=0, content="log:", version=1)]
    landed = []
    for n in range(40):
        ops.append(append(f"c{n}", 2 + n * 0.01, None, f"t{n};"))
        if n % 2 == 0:
            landed.append(f"t{n};")
    ops.append(read("r", 10, 11, 1 + len(landed), "log:" + "".join(reversed(landed))))
    [verdict] = check_history(ops)
    assert verdict.linearizable
    assert verdict.operations == 1 + len(landed) + 1  # the appends that never landed are dropped
