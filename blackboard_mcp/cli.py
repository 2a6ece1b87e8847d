"""``blackboard-mcp``: serve, health, token, audit. Thin: the packages do the work."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from blackboard_mcp._cli import (
    DEFAULT_SECRET_FILE,
    ConfigurationError,
    RedisUnreachable,
    check_redis_reachable,
    probe_gateway,
    redis_failures,
    redis_url,
    require_embedded_binaries,
    run_command,
    with_signing_key,
)
from blackboard_mcp.settings import Settings

if TYPE_CHECKING:
    from blackboard_mcp.auth import TokenIssuer, TokenVerifier

DEFAULT_AGENT_TTL = 24 * 3600


def _parse_duration(text: str) -> int:
    match = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError("durations look like 90s, 30m, 12h or 7d")
    factor = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return int(match.group(1)) * factor


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


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

    settings, _ = _with_default_keys(Settings(), create=False)
    try:
        if args.admin:
            token = _issue_admin(settings, args.workspace, args.ttl, args.sub)
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


def _offline_verifier(settings: Settings) -> TokenVerifier:
    """A verifier with this data dir's keys that checks signature and claims, not revocation."""
    from blackboard_mcp.auth import NoRevocations, TokenVerifier, keys_from_settings

    keyed, _ = _with_default_keys(settings, create=False)
    return TokenVerifier(
        keys=keys_from_settings(keyed)[1],
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        leeway=settings.jwt_leeway_seconds,
        revocations=NoRevocations(),
        max_ttl_seconds=settings.max_token_ttl,
    )


def cmd_token_inspect(args: argparse.Namespace) -> int:
    from blackboard_mcp.auth import AuthError

    verifier = _offline_verifier(Settings())
    try:
        grant = asyncio.run(verifier.verify(args.token.strip()))
    except AuthError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(grant.describe(), indent=2))
    return 0


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


def cmd_audit_tail(args: argparse.Namespace) -> int:
    from blackboard_mcp.store import RedisAuditLog, open_client

    settings = Settings()
    url = redis_url(settings)

    async def run() -> None:
        client = open_client(url, cluster=settings.redis_cluster)
        try:
            log = RedisAuditLog(client=client, maxlen=settings.audit_maxlen)
            # as_line escapes every field: a record cannot print a line or a column of its own.
            for rec in reversed(await log.tail(args.workspace, args.count)):
                print(rec.as_line())
        finally:
            await client.aclose()  # type: ignore[attr-defined]  # types-redis 4.6 stubs lag redis-py 8

    with redis_failures(url):
        asyncio.run(run())
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
    parser = argparse.ArgumentParser(prog="blackboard-mcp", description=__doc__)
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback when a command fails"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve", help="run the gateway (embedded Redis when BB_REDIS_URL is unset)"
    )
    serve.add_argument("--host", default=os.environ.get("BB_HOST", "127.0.0.1"))
    # String defaults go through `type` too: a bad BB_PORT is a usage error, not a traceback.
    serve.add_argument("--port", type=int, default=os.environ.get("BB_PORT", "8765"))
    serve.add_argument("--workers", type=int, default=os.environ.get("BB_WORKERS", "1"))
    serve.add_argument("--workspace", default="default", help="workspace of the first admin token")
    serve.set_defaults(func=cmd_serve)

    health = sub.add_parser("health", help="print board health; non-zero exit when unhealthy")
    health.add_argument("--url", help="also check a gateway, e.g. http://127.0.0.1:8765")
    health.set_defaults(func=cmd_health)

    token = sub.add_parser("token", help="issue, inspect or revoke access tokens")
    tsub = token.add_subparsers(dest="token_command", required=True)
    issue = tsub.add_parser("issue", help="print a new token on stdout")
    issue.add_argument("--workspace", required=True)
    issue.add_argument("--sub", default="admin", help="the agent's name: A-Z a-z 0-9 . _ @ -")
    issue.add_argument("--read", type=_csv, default=[])
    issue.add_argument("--write", type=_csv, default=[])
    issue.add_argument("--cap", type=_csv, default=[])
    issue.add_argument("--secret", type=_csv, default=[])
    issue.add_argument(
        "--ttl",
        type=_parse_duration,
        default=None,
        help="lifetime, up to BB_MAX_TOKEN_TTL (default 24h; --admin: BB_MAX_TOKEN_TTL)",
    )
    issue.add_argument(
        "--admin", action="store_true", help="an admin token: every topic, every capability"
    )
    issue.set_defaults(func=cmd_token_issue)
    inspect = tsub.add_parser("inspect", help="verify a token and print its claims")
    inspect.add_argument("token")
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

    audit = sub.add_parser("audit", help="the audit stream")
    asub = audit.add_subparsers(dest="audit_command", required=True)
    tail = asub.add_parser("tail", help="the newest audit records of a workspace")
    tail.add_argument("--workspace", required=True)
    tail.add_argument("--count", type=int, default=50)
    tail.set_defaults(func=cmd_audit_tail)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
