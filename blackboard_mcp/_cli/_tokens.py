"""``blackboard-mcp token issue | inspect``: the board's own tokens, by an operator (``list``
and ``revoke`` are in _token_admin.py, ``delegate`` in _delegate.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from blackboard_mcp.auth import CAPABILITIES
from blackboard_mcp.settings import Settings

from ._delegate import add_delegate_command
from ._durations import FORMAT as DURATION_FORMAT
from ._durations import parse_duration
from ._errors import ConfigurationError, RedisUnreachable
from ._key_files import key_issuer, offline_verifier, with_signing_key
from ._redis import redis_failures, redis_url
from ._token_admin import add_token_admin_commands

if TYPE_CHECKING:
    from blackboard_mcp.auth import Grant

DEFAULT_AGENT_TTL = 24 * 3600
# Who the inventory says issued a token the CLI made: whoever holds the signing key here.
CLI_ISSUER = "cli"


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _capabilities(text: str) -> list[str]:
    names = _csv(text)
    unknown = [n for n in names if n not in CAPABILITIES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown capability {', '.join(map(repr, unknown))}: "
            f"the capabilities are {', '.join(CAPABILITIES)}"
        )
    return names


ADMIN_CAPABILITIES = ["admin", "board_read", "board_write", "file_read"]


def issue_on_record(
    settings: Settings,
    url: str,
    *,
    subject: str,
    workspace: str,
    read: list[str],
    write: list[str],
    capabilities: list[str],
    secrets: list[str],
    ttl_seconds: int,
    issued_by: str,
) -> str:
    """Sign a token and record it in the board's token inventory (its Redis at ``url``)."""
    from blackboard_mcp._composition import open_key_client
    from blackboard_mcp._token_records import RecordedTokens
    from blackboard_mcp.auth import issue_recorded
    from blackboard_mcp.store import RedisTokenInventory

    issuer = key_issuer(settings)

    async def run() -> str:
        client = open_key_client(settings, url=url)
        try:
            token, _ = await issue_recorded(
                issuer,
                RecordedTokens(RedisTokenInventory(client=client)),
                subject=subject,
                workspace=workspace,
                read=read,
                write=write,
                capabilities=capabilities,
                secrets=secrets,
                ttl_seconds=ttl_seconds,
                issued_by=issued_by,
            )
            return token
        finally:
            await client.aclose()

    with redis_failures(url):
        return asyncio.run(run())


def issue_admin(
    settings: Settings,
    url: str,
    workspace: str,
    ttl: int | None = None,
    subject: str = "admin",
    issued_by: str = CLI_ISSUER,
) -> str:
    """An admin token: every topic, every capability, for the longest lifetime allowed."""
    return issue_on_record(
        settings,
        url,
        subject=subject,
        workspace=workspace,
        read=["*"],
        write=["*"],
        capabilities=ADMIN_CAPABILITIES,
        secrets=[],
        ttl_seconds=settings.max_token_ttl if ttl is None else ttl,
        issued_by=issued_by,
    )


def cmd_token_issue(args: argparse.Namespace, settings: Settings) -> int:
    from blackboard_mcp.auth import AuthError, check_admin_topics

    if not args.admin and args.sub is None:
        print(
            "refused: an agent's token needs --sub (the agent's name); "
            "use --admin for an admin token",
            file=sys.stderr,
        )
        return 2
    keyed, _ = with_signing_key(settings, create=False)
    ttl = (
        (keyed.max_token_ttl if args.admin else DEFAULT_AGENT_TTL) if args.ttl is None else args.ttl
    )
    read, write, caps = (
        (["*"], ["*"], ADMIN_CAPABILITIES) if args.admin else (args.read, args.write, args.cap)
    )
    subject = args.sub or "admin"
    issuer = key_issuer(keyed)
    try:
        issuer.check_request(
            subject=subject, workspace=args.workspace, read=read, write=write, ttl_seconds=ttl
        )
        check_admin_topics(caps, read, write)
    except AuthError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    # Checked once the names and the lifetime held, so that those are said first.
    if not args.admin and (problem := _unusable(args)):
        print(f"refused: {problem}", file=sys.stderr)
        return 2
    token = issue_on_record(
        keyed,
        redis_url(keyed),
        subject=subject,
        workspace=args.workspace,
        read=read,
        write=write,
        capabilities=caps,
        secrets=[] if args.admin else args.secret,
        ttl_seconds=ttl,
        issued_by=CLI_ISSUER,
    )
    print(token)
    return 0


def _unusable(args: argparse.Namespace) -> str | None:
    """Why an agent's token as asked could do nothing it names, or None."""
    if args.read and "board_read" not in args.cap:
        return "--read names topics, but without --cap board_read the token cannot read them"
    if args.write and "board_write" not in args.cap:
        return "--write names topics, but without --cap board_write the token cannot write them"
    if not (args.read or args.write or args.cap):
        return (
            "the token would allow nothing: give it topics (--read, --write) with the "
            "capabilities to use them (--cap board_read,board_write)"
        )
    return None


def cmd_token_inspect(args: argparse.Namespace, settings: Settings) -> int:
    """The token's claims with ISO times and its status; exit 1 unless it is valid now."""
    from blackboard_mcp.auth import AuthError, TokenExpired

    from ._audit import iso

    token = args.token.strip()
    status = "valid"
    try:
        grant = offline_verifier(settings).decode(token)
    except TokenExpired:
        # Signed by our key and only out of date: show what it was.
        grant = offline_verifier(settings, leeway=10 * 365 * 86400).decode(token)
        status = "expired"
    except AuthError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 1
    revocation = _revocation(settings, grant)
    if status == "valid" and revocation == "revoked":
        status = "revoked"
    claims = grant.describe()
    claims.update(iat=iso(grant.issued_at), exp=iso(grant.expires_at))
    report = {**claims, "status": status, "revocation": revocation}
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))
    return 0 if status == "valid" else 1


def _revocation(settings: Settings, grant: Grant) -> str:
    """``revoked``, ``not revoked``, or why it could not be checked (the board is elsewhere)."""

    from blackboard_mcp._composition import open_key_client
    from blackboard_mcp.store import RedisRevocationList

    try:
        url = redis_url(settings)
    except ConfigurationError:
        return "not checked: no BB_REDIS_URL and no running `serve` on BB_DATA_DIR"

    async def run() -> bool:
        client = open_key_client(settings, url=url)
        try:
            return await RedisRevocationList(client=client).is_revoked(grant)
        finally:
            await client.aclose()

    try:
        with redis_failures(url):
            return "revoked" if asyncio.run(run()) else "not revoked"
    except RedisUnreachable as exc:
        return f"not checked: {exc.message}"


def add_token_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    token = sub.add_parser("token", help="issue, inspect or revoke access tokens")
    tsub = token.add_subparsers(dest="token_command", required=True)
    issue = tsub.add_parser(
        "issue",
        help="print a new token on stdout",
        description="Print a new access token on stdout: an agent's (--sub, with its topics "
        "and capabilities) or an admin's (--admin).",
    )
    issue.add_argument(
        "--workspace", required=True, help="the token's workspace: a-z 0-9 . _ -, up to 64"
    )
    issue.add_argument(
        "--sub",
        help="the agent's name, A-Z a-z 0-9 . _ @ - (needed for an agent; --admin: admin)",
    )
    issue.add_argument(
        "--read",
        type=_csv,
        default=[],
        help="comma-separated topics it may read; * for all, prefix* for a family",
    )
    issue.add_argument(
        "--write",
        type=_csv,
        default=[],
        help="comma-separated topics it may write; * for all, prefix* for a family",
    )
    issue.add_argument(
        "--cap",
        type=_capabilities,
        default=[],
        help=f"comma-separated capabilities, of: {', '.join(CAPABILITIES)}",
    )
    issue.add_argument(
        "--secret", type=_csv, default=[], help="comma-separated secret handles it may use"
    )
    issue.add_argument(
        "--ttl",
        type=parse_duration,
        default=None,
        help=f"lifetime, {DURATION_FORMAT}; at most BB_MAX_TOKEN_TTL (default: 24h; with "
        "--admin, BB_MAX_TOKEN_TTL)",
    )
    issue.add_argument(
        "--admin", action="store_true", help="an admin token: every topic, every capability"
    )
    issue.set_defaults(func=cmd_token_issue, parser=issue)
    inspect = tsub.add_parser(
        "inspect",
        help="check a token and print its claims; non-zero exit if expired, revoked or invalid",
    )
    inspect.add_argument("token", help="the token (a JWT)")
    inspect.add_argument(
        "--json", action="store_true", help="one JSON object on one line, for machines"
    )
    inspect.set_defaults(func=cmd_token_inspect, parser=inspect)
    add_token_admin_commands(tsub)
    add_delegate_command(tsub)
