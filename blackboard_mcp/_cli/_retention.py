"""``blackboard-mcp retention``: how long a workspace's notes are kept after their last write."""

from __future__ import annotations

import argparse

from blackboard_mcp.settings import Settings
from blackboard_mcp.store import MAX_HISTORY_VERSIONS, Board, DeleteReport, RetentionPolicy

from ._board import audit, on_board, require_workspace
from ._delete import PREVIEW_EXIT, preview_footer, show_report
from ._durations import FORMAT, parse_duration
from ._errors import ConfigurationError

OFF = "off"
FOREVER = "forever"


def _age_or(text: str, clear: str) -> int | None:
    """A duration in seconds; ``clear`` (None) clears the setting, FOREVER (0) keeps for ever."""
    if text == clear:
        return None
    if text == FOREVER:
        return 0
    try:
        return parse_duration(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or {clear!r} or {FOREVER!r}") from None


def _max_age(text: str) -> int | None:
    """None clears the setting; 0 keeps a topic's notes whatever the workspace's setting."""
    return _age_or(text, OFF)


def _age(seconds: int | None) -> str:
    if not seconds:
        return "kept forever" if seconds == 0 else OFF
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


DEFAULT = "default"


def _show(workspace: str, policy: RetentionPolicy) -> None:
    print(f"workspace {workspace}: {_age(policy.max_age_seconds)}")
    for topic, seconds in sorted(policy.topics.items()):
        print(f"  topic {topic}: {_age(seconds)}")
    for name in sorted(set(policy.versions) | set(policy.version_ages)):
        where = "workspace" if name == "*" else f"topic {name}"
        kept = policy.versions.get(name)
        age = policy.version_ages.get(name)
        print(
            f"  history of {where}: "
            + (f"{kept} past versions" if kept is not None else "the default number of versions")
            + (f", each kept {_age(age)}" if age else ", no age bound" if age == 0 else "")
        )


def _versions(text: str) -> int | None:
    if text == DEFAULT:
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_HISTORY_VERSIONS:
        raise argparse.ArgumentTypeError(
            f"a whole number from 0 to {MAX_HISTORY_VERSIONS}, or {DEFAULT!r}"
        )
    return value


def _history_age(text: str) -> int | None:
    return _age_or(text, DEFAULT)


def cmd_retention_history(args: argparse.Namespace, settings: Settings) -> int:
    async def run(board: Board) -> tuple[DeleteReport, RetentionPolicy | None]:
        await require_workspace(board, args.workspace)
        plan = await board.plan_history_bounds(
            workspace=args.workspace,
            topic=args.topic,
            versions=args.versions,
            max_age_seconds=args.max_age,
        )
        if plan.count and not args.yes:
            return plan, None
        policy = await board.set_history_bounds(
            workspace=args.workspace,
            topic=args.topic,
            versions=args.versions,
            max_age_seconds=args.max_age,
        )
        where = f"bb://{args.workspace}/" + (f"{args.topic}/" if args.topic else "")
        await audit(
            board, settings, workspace=args.workspace, tool="cli.retention", target=where,
            outcome=f"history versions {args.versions}, max age {_age(args.max_age)}",
        )  # fmt: skip
        return plan, policy

    plan, policy = on_board(settings, run)
    if policy is None:
        show_report(plan, "would drop", noun="past version")
        preview_footer("set")
        return PREVIEW_EXIT
    _show(args.workspace, policy)
    return 0


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

    async def run(board: Board) -> tuple[DeleteReport, RetentionPolicy | None]:
        plan = await board.plan_retention(
            workspace=args.workspace, topic=args.topic, max_age_seconds=args.max_age
        )
        if plan.count and not args.yes:
            return plan, None
        policy = await board.set_retention(
            workspace=args.workspace, topic=args.topic, max_age_seconds=args.max_age
        )
        where = f"bb://{args.workspace}/" + (f"{args.topic}/" if args.topic else "")
        await audit(
            board, settings, workspace=args.workspace, tool="cli.retention", target=where,
            outcome=f"max age {_age(args.max_age)}",
        )  # fmt: skip
        return plan, policy

    plan, policy = on_board(settings, run)
    if policy is None:
        # Setting it would delete notes at the next sweep: said first, set only with --yes.
        show_report(plan, "would delete")
        print(
            f"  (older than {_age(args.max_age)}, at the gateways' next retention sweep)",
        )
        preview_footer("set")
        return PREVIEW_EXIT
    _show(args.workspace, policy)
    if plan.count:
        print(f"{plan.count} notes older than that go at the gateways' next retention sweep")
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
    put.add_argument(
        "--yes",
        action="store_true",
        help="set it even though notes older than that would be deleted (without it, they are "
        "listed and nothing is set)",
    )
    put.set_defaults(func=cmd_retention_set, parser=put)
    history = rsub.add_parser(
        "history",
        help="set how many past versions of each note are kept, and for how long",
        description="Past versions kept per note, and their maximum age since they were "
        "written, for a workspace or one of its topics (a topic's setting overrides its "
        "workspace's, which overrides the board's BB_HISTORY_VERSIONS and "
        "BB_HISTORY_MAX_AGE_SECONDS). The count is applied when a note is next written; the "
        "age also by the gateways' retention sweep. The current version is never dropped.",
    )
    history.add_argument("--workspace", required=True, help="the workspace to set it for")
    history.add_argument("--topic", help="set it for this topic only, overriding the workspace's")
    history.add_argument(
        "--versions",
        required=True,
        type=_versions,
        help=f"past versions kept per note, 0 to {MAX_HISTORY_VERSIONS} (0: none); "
        f"{DEFAULT!r} clears it",
    )
    history.add_argument(
        "--max-age",
        required=True,
        type=_history_age,
        help=f"{FORMAT}; {FOREVER!r}: no age bound; {DEFAULT!r} clears it",
    )
    history.add_argument(
        "--yes",
        action="store_true",
        help="set them even though kept versions would be dropped (without it, they are "
        "listed and nothing is set)",
    )
    history.set_defaults(func=cmd_retention_history, parser=history)
