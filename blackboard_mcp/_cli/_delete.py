"""``blackboard-mcp delete``: remove a note, a topic or a workspace's notes, shown first."""

from __future__ import annotations

import argparse
import sys

from blackboard_mcp.settings import Settings
from blackboard_mcp.store import Board, DeleteReport, InvalidArgument, parse_address

from ._board import audit, on_board, operator
from ._errors import CliError, ConfigurationError

# A dry run names this many of the notes that would go.
_SHOWN = 20
# Every preview (a command that would remove notes, run without --yes) exits with this:
# nothing was changed, which a script must not take for done.
PREVIEW_EXIT = 1


class NothingToDelete(CliError):
    """The target holds no notes: a typo'd topic or address, most likely."""


def preview_footer(what: str) -> None:
    print(f"nothing was {what}: run again with --yes to go ahead", file=sys.stderr)


def _target(args: argparse.Namespace) -> str:
    """The workspace, from --workspace or the address of --uri (both: they must agree)."""
    if args.uri is None:
        if args.workspace is None:
            raise ConfigurationError(
                "delete needs --workspace (with --topic, or alone for every note), or --uri",
                hint="see `blackboard-mcp delete --help`",
            )
        return str(args.workspace)
    try:
        address = parse_address(args.uri)
    except InvalidArgument as exc:
        raise ConfigurationError(
            f"--uri {args.uri!r} is not a note's address: {exc.message}",
            hint="give bb://WORKSPACE/TOPIC/KEY",
        ) from None
    if args.workspace is not None and args.workspace != address.workspace:
        raise ConfigurationError(
            f"--uri is in workspace {address.workspace!r}, not {args.workspace!r}",
            hint="drop --workspace: the address names it",
        )
    return address.workspace


def _nothing(args: argparse.Namespace, workspace: str) -> NothingToDelete:
    preview = f"`blackboard-mcp delete --workspace {workspace} --topic TOPIC`"
    if args.uri is not None:
        return NothingToDelete(
            f"no note {args.uri}",
            hint=f"check the address; {preview} (without --yes) lists a topic's notes",
        )
    if args.topic is not None:
        return NothingToDelete(
            f"no notes in topic {args.topic!r} of workspace {workspace!r}",
            hint="check the topic's name; `blackboard-mcp export --workspace "
            f"{workspace}` shows every note",
        )
    return NothingToDelete(
        f"no notes in workspace {workspace!r}", hint="check the workspace's name"
    )


def show_report(report: DeleteReport, verb: str, *, noun: str = "note") -> None:
    print(f"{verb} {report.count} {noun}{'' if report.count == 1 else 's'} under {report.target}")
    for uri in report.uris[:_SHOWN]:
        print(f"  {uri}")
    if report.count > _SHOWN:
        print(f"  ... and {report.count - _SHOWN} more")


def cmd_delete(args: argparse.Namespace, settings: Settings) -> int:
    workspace = _target(args)

    async def run(board: Board) -> DeleteReport:
        plan = await board.plan_delete(workspace=workspace, topic=args.topic, uri=args.uri)
        if not args.yes or plan.count == 0:
            return plan
        report = await board.delete(
            author=operator(), workspace=workspace, topic=args.topic, uri=args.uri
        )
        await audit(
            board,
            settings,
            workspace=workspace,
            tool="cli.delete",
            target=report.target,
            outcome=f"deleted {report.count}",
        )
        return report

    report = on_board(settings, run)
    if report.count == 0:
        raise _nothing(args, workspace)
    if not args.yes:
        show_report(report, "would delete")
        preview_footer("deleted")
        return PREVIEW_EXIT
    show_report(report, "deleted")
    return 0


def add_delete_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    delete = sub.add_parser(
        "delete",
        help="delete a note, a topic or every note of a workspace (shows what would go "
        "unless --yes)",
        description="Delete notes with their indexes, links (both ends), offloaded bodies and "
        "search entries. A reader following a cursor is told of each deletion; the audit "
        "stream records who deleted what. Without --yes, print how many would go and the "
        "first addresses, delete nothing and exit 1.",
    )
    delete.add_argument(
        "--workspace", help="the workspace to delete from (with --uri, the address names it)"
    )
    target = delete.add_mutually_exclusive_group()
    target.add_argument("--topic", help="delete every note of this topic")
    target.add_argument("--uri", help="delete this one note, e.g. bb://WS/TOPIC/KEY")
    delete.add_argument(
        "--yes", action="store_true", help="delete for real (without it, nothing is deleted)"
    )
    delete.set_defaults(func=cmd_delete, parser=delete)
