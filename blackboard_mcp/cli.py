"""``blackboard-mcp``: serve, health, token, audit, delete, retention, export, import.

Thin: the packages do the work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from blackboard_mcp import __version__
from blackboard_mcp._cli import (
    DEFAULT_SECRET_FILE,
    DURATION_FORMAT,
    ConfigurationError,
    RedisUnreachable,
    add_audit_commands,
    add_delete_command,
    add_retention_commands,
    add_transfer_commands,
    check_redis_reachable,
    parse_duration,
    probe_gateway,
    redis_failures,
    redis_url,
    require_embedded_binaries,
    run_command,
    with_signing_key,
)
from blackboard_mcp.auth import CAPABILITIES
from blackboard_mcp.settings import Settings

if TYPE_CHECKING:
    from blackboard_mcp.auth import Grant, TokenIssuer, TokenVerifier

DEFAULT_AGENT_TTL = 24 * 3600


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


def _with_default_keys(settings: Settings, *, create: bool) -> tuple[Settings, bool]:
    """With no key configured, use a secret in the data dir; only `serve` may create it."""
    return with_signing_key(settings, create=create)


def cmd_serve(args: argparse.Namespace) -> int:
    from blackboard_mcp.serve import ServeFailure, Serving

    settings = Settings()
    if settings.redis_url:
        # Before anything is announced: a gateway on a Redis it cannot reach would look fine
        # and answer every call `unavailable`.
        check_redis_reachable(settings.redis_url)
    else:
        require_embedded_binaries()
    try:
        with Serving(Settings(), host=args.host, port=args.port, workers=args.workers) as serving:
            # Only now that the data dir, the port and Redis are ours: a start that fails
            # before this point creates no key, so the next one still shows the first token.
            settings, created = _with_default_keys(Settings(), create=True)
            if settings.jwt_secret_file:
                os.environ["BB_JWT_SECRET_FILE"] = str(settings.jwt_secret_file)
            print(f"blackboard-mcp: MCP endpoint {serving.endpoint}", flush=True)
            if serving.embedded or created:
                print(f"blackboard-mcp: data in {settings.data_dir}", flush=True)
            if created:
                token = _issue_admin(settings, args.workspace)
                print(f"blackboard-mcp: signing key created at {settings.jwt_secret_file}")
                print(
                    f"blackboard-mcp: admin token for workspace {args.workspace!r} (shown once; "
                    f"mint another with `{_mint_admin_hint(args.workspace)}`):"
                )
                print(token, flush=True)
            elif settings.jwt_secret_file == settings.data_dir / DEFAULT_SECRET_FILE:
                print(f"blackboard-mcp: admin tokens: `{_mint_admin_hint(args.workspace)}`")
            return serving.run()
    except ServeFailure as exc:
        print(f"blackboard-mcp: {exc}", file=sys.stderr, flush=True)
        return int(exc.exit_code)


def _mint_admin_hint(workspace: str) -> str:
    data_dir = os.environ.get("BB_DATA_DIR")
    prefix = f"BB_DATA_DIR={data_dir} " if data_dir else ""
    return f"{prefix}blackboard-mcp token issue --admin --workspace {workspace}"


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


def _issue_admin(
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


def cmd_token_issue(args: argparse.Namespace) -> int:
    from blackboard_mcp.auth import AuthError

    if not args.admin and args.sub is None:
        print(
            "refused: an agent's token needs --sub (the agent's name); "
            "use --admin for an admin token",
            file=sys.stderr,
        )
        return 2
    settings, _ = _with_default_keys(Settings(), create=False)
    try:
        if args.admin:
            token = _issue_admin(settings, args.workspace, args.ttl, args.sub or "admin")
        else:
            token = _issuer(settings).issue(
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
    print(token)
    return 0


def _offline_verifier(settings: Settings, *, leeway: int | None = None) -> TokenVerifier:
    """A verifier with this data dir's keys that checks signature and claims, not revocation.

    ``leeway`` past the configured one lets `token inspect` read an expired token's claims.
    """
    from blackboard_mcp.auth import NoRevocations, TokenVerifier, keys_from_settings

    keyed, _ = _with_default_keys(settings, create=False)
    return TokenVerifier(
        keys=keys_from_settings(keyed)[1],
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        leeway=settings.jwt_leeway_seconds if leeway is None else leeway,
        revocations=NoRevocations(),
        max_ttl_seconds=settings.max_token_ttl,
    )


def cmd_token_inspect(args: argparse.Namespace) -> int:
    """The token's claims with ISO times and its status; exit 1 unless it is valid now."""
    from blackboard_mcp._cli import iso
    from blackboard_mcp.auth import AuthError, TokenExpired

    settings = Settings()
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
    print(json.dumps({**claims, "status": status, "revocation": revocation}, indent=2))
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


def cmd_token_revoke(args: argparse.Namespace) -> int:
    from blackboard_mcp.auth import AuthError, Revoker
    from blackboard_mcp.store import RedisRevocationList, open_client

    settings = Settings()
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


def cmd_health(args: argparse.Namespace) -> int:
    """Board health for a human: exits 1 when anything is unhealthy."""
    healthy = True
    if args.url:
        for path, answer, ok in probe_gateway(args.url):
            print(f"gateway {path}: {answer}")
            healthy = healthy and ok
    try:
        url = redis_url(Settings())
    except ConfigurationError:
        if not args.url:
            raise
        return 0 if healthy else 1  # the gateway alone was asked about
    try:
        with redis_failures(url):
            report = asyncio.run(_board_health(url))
    except RedisUnreachable as exc:
        # Still a report, on one line: what is down and what to check.
        print(json.dumps({"redis": "unavailable", "error": exc.message, "hint": exc.hint}))
        return 1
    print(json.dumps(report, indent=2))
    healthy = healthy and report.get("redis") == "ok" and report.get("index") == "ready"
    return 0 if healthy else 1


async def _board_health(url: str) -> dict[str, object]:
    from blackboard_mcp.store import Board

    board = Board.from_url(url, cluster=Settings().redis_cluster)
    try:
        return await board.health()
    finally:
        await board.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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

    serve = sub.add_parser(
        "serve",
        help="run the board's MCP server (with an embedded Redis when BB_REDIS_URL is unset)",
    )
    serve.add_argument(
        "--host",
        default=os.environ.get("BB_HOST", "127.0.0.1"),
        help="address to listen on (default: BB_HOST or 127.0.0.1)",
    )
    # String defaults go through `type` too: a bad BB_PORT is a usage error, not a traceback.
    serve.add_argument(
        "--port",
        type=int,
        default=os.environ.get("BB_PORT", "8765"),
        help="port to listen on (default: BB_PORT or 8765)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=os.environ.get("BB_WORKERS", "1"),
        help="server processes (default: BB_WORKERS or 1)",
    )
    serve.add_argument(
        "--workspace",
        default="default",
        help="workspace of the admin token printed on first start (default: default)",
    )
    serve.set_defaults(func=cmd_serve)

    health = sub.add_parser("health", help="print board health; non-zero exit when unhealthy")
    health.add_argument("--url", help="also check a gateway, e.g. http://127.0.0.1:8765")
    health.set_defaults(func=cmd_health)

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
    issue.set_defaults(func=cmd_token_issue)
    inspect = tsub.add_parser(
        "inspect",
        help="check a token and print its claims; non-zero exit if expired, revoked or invalid",
    )
    inspect.add_argument("token", help="the token (a JWT)")
    inspect.set_defaults(func=cmd_token_inspect)
    revoke = tsub.add_parser(
        "revoke", help="revoke a token, a token id or every token of a subject, in one workspace"
    )
    revoke.add_argument("--workspace", help="the workspace whose token or subject is revoked")
    group = revoke.add_mutually_exclusive_group(required=True)
    group.add_argument("--token", help="the token itself: revoked until it expires")
    group.add_argument("--id", help="a token id (jti): revoked for BB_MAX_TOKEN_TTL")
    group.add_argument("--sub", help="every token of a subject issued so far")
    revoke.set_defaults(func=cmd_token_revoke)

    add_audit_commands(sub)
    add_delete_command(sub)
    add_transfer_commands(sub)
    add_retention_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
