"""``blackboard-mcp retention``: how long a workspace's notes are kept after their last write."""

from __future__ import annotations

import argparse

from blackboard_mcp.settings import Settings
from blackboard_mcp.store import Board, RetentionPolicy

from ._board import audit, on_board, require_workspace
from ._durations import FORMAT, parse_duration
from ._errors import ConfigurationError

OFF = "off"
FOREVER = "forever"


def _max_age(text: str) -> int | None:
    """None clears the setting; 0 keeps a topic's notes whatever the workspace's setting."""
    if text == OFF:
        return None
    if text == FOREVER:
        return 0
    try:
        return parse_duration(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or {OFF!r} or {FOREVER!r}") from None


def _age(seconds: int | None) -> str:
    if not seconds:
        return "kept forever" if seconds == 0 else OFF
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _show(workspace: str, policy: RetentionPolicy) -> None:
    print(f"workspace {workspace}: {_age(policy.max_age_seconds)}")
    for topic, seconds in sorted(policy.topics.items()):
        print(f"  topic {topic}: {_age(seconds)}")


def cmd_retention_show(args: argparse.Namespace, settings: Settings) -> int:
    async def run(board: Board) -> RetentionPolicy:
        policy = await board.retention(args.workspace)
        if policy.max_age_seconds is None and not policy.topics:
            await require_workspace(board, args.workspace)
        return policy

    policy = on_board(settings, run)
    _show(args.workspace, policy)
    return 0


def cmd_retention_set(args: argparse.Namespace, settings: Settings) -> int:
    if args.max_age == 0 and not args.topic:
        raise ConfigurationError(
            f"{FOREVER!r} is for a topic whose notes are kept whatever the workspace's age",
            hint=f"add --topic T, or use --max-age {OFF} to turn the workspace's retention off",
        )

    async def run(board: Board) -> RetentionPolicy:
        policy = await board.set_retention(
            workspace=args.workspace, topic=args.topic, max_age_seconds=args.max_age
        )
        where = f"bb://{args.workspace}/" + (f"{args.topic}/" if args.topic else "")
        await audit(
            board, settings, workspace=args.workspace, tool="cli.retention", target=where,
            outcome=f"max age {_age(args.max_age)}",
        )  # fmt: skip
        return policy

    _show(args.workspace, on_board(settings, run))
    return 0


def add_retention_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    retention = sub.add_parser(
        "retention",
        help="show or set how long notes are kept after their last write",
        description="Notes older than their maximum age (since their last write) are deleted "
        "by the running gateways, one sweep at a time, every BB_RETENTION_SWEEP_SECONDS. "
        "Off by default. A topic's setting overrides its workspace's.",
    )
    rsub = retention.add_subparsers(dest="retention_command", required=True)
    show = rsub.add_parser("show", help="print a workspace's retention settings")
    show.add_argument("--workspace", required=True, help="the workspace to show")
    show.set_defaults(func=cmd_retention_show, parser=show)
    put = rsub.add_parser("set", help="set (or clear) a workspace's or a topic's maximum age")
    put.add_argument("--workspace", required=True, help="the workspace to set it for")
    put.add_argument("--topic", help="set it for this topic only, overriding the workspace's")
    put.add_argument(
        "--max-age",
        required=True,
        type=_max_age,
        help=f"{FORMAT}; {OFF!r} clears the setting; {FOREVER!r} (on a topic) keeps its notes "
        "whatever the workspace's setting",
    )
    put.set_defaults(func=cmd_retention_set, parser=put)
