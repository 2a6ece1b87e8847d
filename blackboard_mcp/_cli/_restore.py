"""``blackboard-mcp restore``: write a note's past version again as its newest, audited."""

from __future__ import annotations

import argparse

from blackboard_mcp.settings import Settings
from blackboard_mcp.store import Board, parse_address

from ._board import audit, on_board, operator


def cmd_restore(args: argparse.Namespace, settings: Settings) -> int:
    address = parse_address(args.uri)

    async def run(board: Board) -> int:
        result = await board.restore(address, author=operator())
        await audit(
            board,
            settings,
            workspace=address.workspace,
            tool="cli.restore",
            target=address.uri,
            outcome=f"restored as version {result['version']}",
        )
        return result["version"]

    version = on_board(settings, run)
    print(f"restored {address.uri} as version {version} of {address.note.uri}")
    return 0


def add_restore_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    restore = sub.add_parser(
        "restore",
        help="write a note's past version again as its newest version",
        description="Read the kept version URI names (bb://WS/TOPIC/KEY@N) and write its "
        "content, digest, sources and confidence as the note's next version, by "
        "compare-and-swap: if the note is written meanwhile, nothing is written and the "
        "command fails with `conflict`; run it again. The audit stream records who restored "
        "what. List a note's versions with list_keys(topic=<note address>).",
    )
    restore.add_argument("uri", help="the version to restore, e.g. bb://WS/TOPIC/KEY@3")
    restore.set_defaults(func=cmd_restore, parser=restore)
