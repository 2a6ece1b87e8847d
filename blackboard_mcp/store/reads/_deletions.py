"""What a reader following a ``cursor`` is told was deleted since: the deleted-notes set that
every delete adds to (store/lifecycle/_delete.py), read beside a read's other commands."""

from __future__ import annotations

from typing import Any

from ..connection import _key_names as keys


def deleted_since(workspace: str, since: int, *, limit: int = 1000) -> tuple[Any, ...]:
    """The command that reads up to ``limit`` notes deleted after sequence number ``since``
    (its raw reply decoded by ``decode_deleted``), sent with a read's other commands so a
    cursor read costs no extra round trip."""
    return (
        "ZRANGEBYSCORE", keys.deleted(workspace), f"({since}", "+inf",
        "WITHSCORES", "LIMIT", 0, limit,
    )  # fmt: skip


def decode_deleted(reply: list[bytes]) -> list[tuple[int, str]]:
    """The raw reply (member, score, member, score...) as (seq, member), oldest first."""
    return [
        (int(float(score)), member.decode())
        for member, score in zip(reply[::2], reply[1::2], strict=True)
    ]
