"""``blackboard-mcp delete``: remove a note, a topic or a workspace's notes, shown first."""

from __future__ import annotations

import argparse
import sys

from blackboard_mcp.settings import Settings
from blackboard_mcp.store import Board, DeleteReport

from ._board import audit, on_board, operator

# A dry run names this many of the notes that would go.
_SHOWN = 20


def _show(report: DeleteReport, verb: str) -> None:
    print(f"{verb} {report.count} note{'' if report.count == 1 else 's'} under {report.target}")
    for uri in report.uris[:_SHOWN]:
        print(f"  {uri}")
    if report.count > _SHOWN:
        print(f"  ... and {report.count - _SHOWN} more")


def cmd_delete(args: argparse.Namespace, settings: Settings) -> int:
    async def run(board: Board) -> DeleteReport:
        if not args.yes:
            return await board.plan_delete(workspace=args.workspace, topic=args.topic, uri=args.uri)
        report = await board.delete(
            author=operator(), workspace=args.workspace, topic=args.topic, uri=args.uri
        )
        await audit(
            board,
            settings,
            workspace=args.workspace,
            tool="cli.delete",
            target=report.target,
            outcome=f"deleted {report.count}",
        )
        return report

    report = on_board(settings, run)
    if not args.yes:
        _show(report, "would delete")
        print("nothing was deleted: run again with --yes to delete these", file=sys.stderr)
        return 0
    _show(report, "deleted")
    return 0


def add_delete_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    delete = sub.add_parser(
        "delete",
        help="delete a note, a topic or every note of a workspace (shows what would go "
        "unless --yes)",
        description="Delete notes with their indexes, links (both ends), offloaded bodies and "
        "search entries. A reader following a cursor is told of each deletion; the audit "
        "stream records who deleted what. Without --yes, print what would go and delete "
        "nothing.",
    )
    delete.add_argument("--workspace", required=True, help="the workspace to delete from")
    target = delete.add_mutually_exclusive_group()
    target.add_argument("--topic", help="delete every note of this topic")
    target.add_argument("--uri", help="delete this one note, e.g. bb://WS/TOPIC/KEY")
    delete.add_argument(
        "--yes", action="store_true", help="delete for real (without it, nothing is deleted)"
    )
    delete.set_defaults(func=cmd_delete, parser=delete)
