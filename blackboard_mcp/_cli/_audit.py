"""``blackboard-mcp audit tail``: the audit stream for people (aligned columns, ISO times) or
machines (``--json``, one object a line), now or as it grows (``--follow``)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
from collections.abc import Sequence

from blackboard_mcp.auth import AuditRecord, printable
from blackboard_mcp.settings import Settings
from blackboard_mcp.store import Board, RedisAuditLog, is_valid_name

from ._board import on_board
from ._errors import RUNTIME_FAILURE, ConfigurationError

HEADER = ("TIME (UTC)", "SUBJECT", "TOOL", "OUTCOME", "MS", "ADDRESSES")
_FOLLOW_BLOCK_MS = 1000


def iso(seconds: float) -> str:
    moment = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def as_json(record: AuditRecord) -> str:
    return json.dumps(
        {
            "at": iso(record.at),
            "workspace": record.workspace,
            "subject": record.subject,
            "tool": record.tool,
            "outcome": record.outcome,
            "duration_ms": round(record.duration_ms, 1),
            "addresses": list(record.addresses),
            "request_id": record.request_id,
        }
    )


def cells(record: AuditRecord) -> tuple[str, ...]:
    # printable() escapes every control character: a record cannot print a line of its own.
    return (
        iso(record.at),
        printable(record.subject),
        printable(record.tool),
        printable(record.outcome),
        f"{record.duration_ms:.1f}",
        ",".join(printable(a) for a in record.addresses),
    )


def table(rows: Sequence[tuple[str, ...]], widths: list[int]) -> list[str]:
    """Rows padded to ``widths`` (grown to fit), the last column left as it is."""
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]


def cmd_audit_tail(args: argparse.Namespace, settings: Settings) -> int:
    if not is_valid_name(args.workspace):
        raise ConfigurationError(
            f"{args.workspace!r} is not a workspace name",
            hint="a workspace is 1-64 of a-z 0-9 . _ -, starting with a letter or digit",
        )

    async def newest(board: Board) -> tuple[list[tuple[str, AuditRecord]], bool]:
        log = RedisAuditLog(redis=board.redis, maxlen=settings.audit_maxlen)
        entries = list(reversed(await log.newest(args.workspace, args.count)))
        return entries, bool(entries) or await board.workspace_exists(args.workspace)

    entries, exists = on_board(settings, newest)
    if not exists:
        print(
            f"no workspace {args.workspace!r} on this board: no notes and no audit records",
            file=sys.stderr,
        )
        return RUNTIME_FAILURE
    widths = [len(h) for h in HEADER[:-1]]
    if not entries:
        print(f"no audit records for workspace {args.workspace!r} yet", file=sys.stderr)
    elif args.json:
        for _id, record in entries:
            print(as_json(record))
    else:
        for line in table([HEADER, *(cells(r) for _, r in entries)], widths):
            print(line)
    if not args.follow:
        return 0
    sys.stdout.flush()
    last = entries[-1][0] if entries else "$"
    return on_board(settings, lambda board: _follow(board, settings, args, last, widths))


async def _follow(
    board: Board, settings: Settings, args: argparse.Namespace, last: str, widths: list[int]
) -> int:
    """Print records as they arrive, until interrupted (Ctrl-C exits 130)."""
    log = RedisAuditLog(redis=board.redis, maxlen=settings.audit_maxlen)
    while True:
        entries = await log.after(args.workspace, last, block_ms=_FOLLOW_BLOCK_MS)
        for entry_id, record in entries:
            last = entry_id
            line = as_json(record) if args.json else table([cells(record)], widths)[0]
            print(line, flush=True)
        if not entries:
            await asyncio.sleep(0)


def add_audit_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = sub.add_parser("audit", help="read the audit stream: who did what, when")
    asub = audit.add_subparsers(dest="audit_command", required=True)
    tail = asub.add_parser(
        "tail",
        help="print a workspace's newest audit records, oldest first",
        description="Print a workspace's newest audit records, oldest first: aligned columns "
        "with times in UTC (ISO 8601), or one JSON object a line with --json.",
    )
    tail.add_argument("--workspace", required=True, help="the workspace whose records to print")
    tail.add_argument(
        "--count", type=int, default=50, help="how many of the newest records (default 50)"
    )
    tail.add_argument("--json", action="store_true", help="one JSON object a line, for machines")
    tail.add_argument(
        "--follow",
        action="store_true",
        help="keep printing records as they are written, until interrupted",
    )
    tail.set_defaults(func=cmd_audit_tail, parser=tail)
