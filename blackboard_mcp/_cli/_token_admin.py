"""``blackboard-mcp token list | revoke``: who holds the board's tokens, and taking them back.

Both read the token inventory in the board's Redis (auth/_inventory.py). A revocation names a
token or subject the board issued in that workspace, or is refused (exit 2) naming what was
not found; ``--force`` revokes a subject ahead of any token, or an id the board has no
record of (a token issued before tokens were recorded).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from blackboard_mcp.settings import Settings

from ._redis import redis_failures, redis_url

if TYPE_CHECKING:
    from blackboard_mcp.auth import ListedToken

_COLUMNS = ("id", "sub", "status", "expires", "last_used", "parent", "read", "write", "caps")


def cmd_token_list(args: argparse.Namespace, settings: Settings) -> int:
    from blackboard_mcp.auth import is_subject, is_workspace

    if not is_workspace(args.workspace):
        print(f"refused: {args.workspace!r} is not a workspace name", file=sys.stderr)
        return 2
    if args.sub is not None and not is_subject(args.sub):
        print(f"refused: {args.sub!r} is not a subject name", file=sys.stderr)
        return 2
    url = redis_url(settings)
    with redis_failures(url):
        listed = asyncio.run(_listing(url, settings, args.workspace, args.sub))
    described = [t.describe() for t in listed]
    if args.json:
        print(json.dumps(described))
        return 0
    if not described:
        print(f"no tokens on record in workspace {args.workspace}", file=sys.stderr)
        return 0
    print(_table(described))
    return 0


async def _listing(
    url: str, settings: Settings, workspace: str, subject: str | None
) -> list[ListedToken]:
    from blackboard_mcp._composition import open_key_client
    from blackboard_mcp._token_records import RecordedTokens
    from blackboard_mcp.store import RedisTokenInventory

    client = open_key_client(settings, url=url)
    try:
        return await RecordedTokens(RedisTokenInventory(client=client)).listing(
            workspace, subject=subject
        )
    finally:
        await client.aclose()


def _table(rows: list[dict[str, object]]) -> str:
    from ._audit import iso

    def cell(row: dict[str, object], name: str) -> str:
        value = row.get(name)
        if value is None:
            return "-"
        if name in ("expires", "last_used") and isinstance(value, int | float):
            return iso(float(value))
        if isinstance(value, list):
            return ",".join(str(v) for v in value) or "-"
        return str(value)

    lines = [[name.upper() for name in _COLUMNS]]
    lines += [[cell(row, name) for name in _COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(_COLUMNS))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def cmd_token_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from blackboard_mcp._composition import open_key_client, token_revoker
    from blackboard_mcp._token_records import RecordedTokens
    from blackboard_mcp.auth import AuthError
    from blackboard_mcp.store import RedisRevocationList, RedisTokenInventory

    from ._key_files import offline_verifier

    presented = None
    if args.token:
        # The token's own claims say its workspace and expiry, once its signature holds.
        try:
            presented = offline_verifier(settings).decode(args.token.strip())
        except AuthError as exc:
            print(f"refused: {exc}", file=sys.stderr)
            return 2
        if args.workspace and args.workspace != presented.workspace:
            print(f"refused: that token is for workspace {presented.workspace}", file=sys.stderr)
            return 2
    elif not args.workspace:
        print("refused: --id and --sub need --workspace", file=sys.stderr)
        return 2

    async def run() -> str:
        client = open_key_client(settings, url=url)
        revoker = token_revoker(
            settings,
            revocations=RedisRevocationList(client=client),
            inventory=RecordedTokens(RedisTokenInventory(client=client)),
        )
        try:
            if presented is not None:
                return await revoker.revoke_presented(presented, workspace=presented.workspace)
            if args.id:
                return await revoker.revoke_token_id(args.workspace, args.id, force=args.force)
            return await revoker.revoke_subject(args.workspace, args.sub, force=args.force)
        finally:
            await client.aclose()

    url = redis_url(settings)
    try:
        with redis_failures(url):
            target = asyncio.run(run())
    except AuthError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        print(f"  {exc.hint}", file=sys.stderr)
        return 2
    workspace = presented.workspace if presented is not None else args.workspace
    print(f"revoked {target} in workspace {workspace}")
    return 0


def add_token_admin_commands(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    listing = tsub.add_parser(
        "list",
        help="the tokens the board issued in a workspace, with status and last use",
        description="Every token the board issued in the workspace and not expired for over "
        "an hour: id, subject, status (active, revoked, expired), expiry, last use (to the "
        "minute), the token it was delegated from, topics and capabilities. Tokens of an "
        "external identity provider are not listed.",
    )
    listing.add_argument("--workspace", required=True, help="the workspace whose tokens to list")
    listing.add_argument("--sub", help="only this subject's tokens")
    listing.add_argument(
        "--json", action="store_true", help="a JSON array, one object per token, for machines"
    )
    listing.set_defaults(func=cmd_token_list, parser=listing)
    revoke = tsub.add_parser(
        "revoke", help="revoke a token, a token id or every token of a subject, in one workspace"
    )
    revoke.add_argument("--workspace", help="the workspace whose token or subject is revoked")
    group = revoke.add_mutually_exclusive_group(required=True)
    group.add_argument("--token", help="the token itself: revoked until it expires")
    group.add_argument("--id", help="a token id (jti) the board issued: revoked until it expires")
    group.add_argument(
        "--sub", help="every token of a subject issued so far (and every token delegated from them)"
    )
    revoke.add_argument(
        "--force",
        action="store_true",
        help="revoke an id or subject the board has no record of (a subject ahead of any "
        "token, a token issued before tokens were recorded)",
    )
    revoke.set_defaults(func=cmd_token_revoke, parser=revoke)
