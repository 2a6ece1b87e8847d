"""The board page's activity: writes per minute over the last hour, per topic and author."""

from __future__ import annotations

from blackboard_mcp.gateway.page._routes import ACTIVITY_MINUTES, writes_per_minute

NOW = 1_800_000_000.0  # a fixed clock: 2027-01-15, on a minute boundary
START_MS = (int(NOW) // 60 - ACTIVITY_MINUTES + 1) * 60_000


def change(at_ms: int, topic: str, author: str) -> dict[str, str]:
    return {"at": str(at_ms), "uri": f"bb://ws/{topic}/k", "author": author, "op": "update"}


def test_writes_are_counted_per_minute_per_topic_and_author_within_the_hour() -> None:
    changes = [  # newest first, as the change log is read
        change(int(NOW * 1000), "facts", "alice"),
        change(int(NOW * 1000) - 30_000, "facts", "bob"),
        change(START_MS + 59_999, "plans", "alice"),
        change(START_MS, "secret", "carol"),
        change(START_MS - 1, "facts", "alice"),  # older than the hour: the walk stops here
    ]
    out = writes_per_minute(changes, lambda topic: topic != "secret", NOW)
    assert out["start_ms"] == START_MS and out["minutes"] == ACTIVITY_MINUTES
    facts = [0] * ACTIVITY_MINUTES
    facts[-1], facts[-2] = 1, 1
    plans = [0] * ACTIVITY_MINUTES
    plans[0] = 1
    assert out["by_topic"] == {"facts": facts, "plans": plans}
    alice = [0] * ACTIVITY_MINUTES
    alice[0], alice[-1] = 1, 1
    bob = [0] * ACTIVITY_MINUTES
    bob[-2] = 1
    assert out["by_author"] == {"alice": alice, "bob": bob}  # carol: only an unreadable topic
    assert out["complete"] is True


def test_an_admin_is_shown_the_last_hours_refused_and_failed_calls_by_code() -> None:
    from blackboard_mcp.auth import AuditRecord
    from blackboard_mcp.gateway.page._routes import refused_in_the_last_hour

    def record(ago: float, outcome: str) -> AuditRecord:
        return AuditRecord(
            at=NOW - ago, workspace="ws", subject="s", tool="update_state", addresses=(),
            outcome=outcome, duration_ms=1.0, request_id="r",
        )  # fmt: skip

    records = [record(10, "conflict"), record(20, "ok"), record(30, "conflict"),
               record(40, "forbidden"), record(3700, "conflict")]  # fmt: skip
    assert refused_in_the_last_hour(records, NOW) == {"conflict": 2, "forbidden": 1}
