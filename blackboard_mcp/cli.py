"""``blackboard-mcp``: serve, health, token, audit, delete, retention, export, import.

Thin: the parser and the entry point. Each command lives in ``_cli/`` and takes its parsed
arguments and the settings, read once per process by ``run_command``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from blackboard_mcp import __version__
from blackboard_mcp._cli import (
    add_audit_commands,
    add_delete_command,
    add_health_command,
    add_restore_command,
    add_retention_commands,
    add_serve_command,
    add_token_commands,
    add_transfer_commands,
    run_command,
)
from blackboard_mcp._cli._errors import Parser

DESCRIPTION = """\
A shared blackboard for fleets of LLM agents: small versioned notes that agents write,
read, list, search and link through five MCP tools, each agent with a token that says
which topics it may read and write. `serve` runs the board; the other commands are for
the people who run it: tokens, health, the audit trail, and the data itself (delete,
retention, export, import).
"""

EPILOG = """\
Settings come from BB_* environment variables (docs/operations.md lists them all). Commands
other than `serve` find the board through BB_REDIS_URL, or through BB_DATA_DIR, the data
dir of a running `serve` with its embedded Redis.
"""


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(
        prog="blackboard-mcp",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback when a command fails"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_serve_command(sub)
    add_health_command(sub)
    add_token_commands(sub)
    add_audit_commands(sub)
    add_delete_command(sub)
    add_transfer_commands(sub)
    add_retention_commands(sub)
    add_restore_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # argparse leaves these to the top-level parser, whose usage says nothing of the
        # command that was typed: the command's own parser refuses them instead.
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    return run_command(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
