"""``blackboard-mcp token issue | inspect | revoke``: the board's own tokens, by an operator."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from blackboard_mcp.auth import CAPABILITIES
from blackboard_mcp.settings import Settings

from ._durations import FORMAT as DURATION_FORMAT
from ._durations import parse_duration
from ._errors import ConfigurationError, RedisUnreachable
from ._keys import with_signing_key
from ._redis import redis_failures, redis_url

if TYPE_CHECKING:
    from blackboard_mcp.auth import Grant, TokenIssuer, TokenVerifier

DEFAULT_AGENT_TTL = 24 * 3600


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


def _issuer(settings: Settings) -> TokenIssuer:
    from blackboard_mcp.auth import TokenIssuer, keys_from_settings

    signing, _ = keys_from_settings(settings)
    if signing is None:
        raise ConfigurationError(
            "no signing key is configured here, only keys to verify with",
            hint="set BB_JWT_SECRET_FILE or BB_JWT_PRIVATE_KEY_FILE to the server's signing key",
        )
    return TokenIssuer(
        signing_key=signing,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        max_ttl_seconds=settings.max_token_ttl,
    )


def issue_admin(
    settings: Settings, workspace: str, ttl: int | None = None, subject: str = "admin"
) -> str:
    """An admin token: every topic, every capability, for the longest lifetime allowed."""
    return _issuer(settings).issue(
        subject=subject,
        workspace=workspace,
        read=["*"],
        write=["*"],
        capabilities=["admin", "board_read", "board_write", "file_read"],
        ttl_seconds=settings.max_token_ttl if ttl is None else ttl,
    )


def cmd_token_issue(args: argparse.Namespace, settings: Settings) -> int:
    from blackboard_mcp.auth import AuthError

    if not args.admin and args.sub is None:
        print(
            "refused: an agent's token needs --sub (the agent's name); "
            "use --admin for an admin token",
            file=sys.stderr,
        )
        return 2
    keyed, _ = with_signing_key(settings, create=False)
    try:
        if args.admin:
            token = issue_admin(keyed, args.workspace, args.ttl, args.sub or "admin")
        else:
            token = _issuer(keyed).issue(
                subject=args.sub,
                workspace=args.workspace,
                read=args.read,
                write=args.write,
                capabilities=args.cap,
                secrets=args.secret,
                ttl_seconds=DEFAULT_AGENT_TTL if args.ttl is None else args.ttl,
            )
    except AuthError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    # Checked once the names and the lifetime held, so that those are said first.
    if not args.admin and (problem := _unusable(args)):
        print(f"refused: {problem}", file=sys.stderr)
        return 2
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


def _offline_verifier(settings: Settings, *, leeway: int | None = None) -> TokenVerifier:
    """A verifier with this data dir's keys that checks signature and claims, not revocation.

    ``leeway`` past the configured one lets `token inspect` read an expired token's claims.
    """
    from blackboard_mcp.auth import NoRevocations, TokenVerifier, keys_from_settings

    keyed, _ = with_signing_key(settings, create=False)
    return TokenVerifier(
        keys=keys_from_settings(keyed)[1],
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        leeway=settings.jwt_leeway_seconds if leeway is None else leeway,
        revocations=NoRevocations(),
        max_ttl_seconds=settings.max_token_ttl,
    )


def cmd_token_inspect(args: argparse.Namespace, settings: Settings) -> int:
    """The token's claims with ISO times and its status; exit 1 unless it is valid now."""
    from blackboard_mcp.auth import AuthError, TokenExpired

    from ._audit import iso

    token = args.token.strip()
    status = "valid"
    try:
        grant = _offline_verifier(settings).decode(token)
    except TokenExpired:
        # Signed by our key and only out of date: show what it was.
        grant = _offline_verifier(settings, leeway=10 * 365 * 86400).decode(token)
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

    from blackboard_mcp.store import RedisRevocationList, open_client

    try:
        url = redis_url(settings)
    except ConfigurationError:
        return "not checked: no BB_REDIS_URL and no running `serve` on BB_DATA_DIR"

    async def run() -> bool:
        client = open_client(url, cluster=settings.redis_cluster)
        try:
            return await RedisRevocationList(client=client).is_revoked(grant)
        finally:
            await client.aclose()  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8

    try:
        with redis_failures(url):
            return "revoked" if asyncio.run(run()) else "not revoked"
    except RedisUnreachable as exc:
        return f"not checked: {exc.message}"


def cmd_token_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from blackboard_mcp.auth import AuthError, Revoker
    from blackboard_mcp.store import RedisRevocationList, open_client

    presented = None
    if args.token:
        # The token's own claims say its workspace and expiry, once its signature holds.
        verifier = _offline_verifier(settings)
        try:
            presented = verifier.decode(args.token.strip())
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
        client = open_client(url, cluster=settings.redis_cluster)
        revoker = Revoker(
            revocations=RedisRevocationList(client=client),
            max_ttl_seconds=settings.max_token_ttl,
            leeway=settings.jwt_leeway_seconds,
        )
        try:
            if presented is not None:
                return await revoker.revoke_presented(presented, workspace=presented.workspace)
            if args.id:
                return await revoker.revoke_token_id(args.workspace, args.id)
            return await revoker.revoke_subject(args.workspace, args.sub)
        finally:
            await client.aclose()  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8

    url = redis_url(settings)
    try:
        with redis_failures(url):
            target = asyncio.run(run())
    except AuthError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    workspace = presented.workspace if presented is not None else args.workspace
    print(f"revoked {target} in workspace {workspace}")
    return 0


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
    revoke = tsub.add_parser(
        "revoke", help="revoke a token, a token id or every token of a subject, in one workspace"
    )
    revoke.add_argument("--workspace", help="the workspace whose token or subject is revoked")
    group = revoke.add_mutually_exclusive_group(required=True)
    group.add_argument("--token", help="the token itself: revoked until it expires")
    group.add_argument("--id", help="a token id (jti): revoked for BB_MAX_TOKEN_TTL")
    group.add_argument("--sub", help="every token of a subject issued so far")
    revoke.set_defaults(func=cmd_token_revoke, parser=revoke)
