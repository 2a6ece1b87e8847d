"""``blackboard-mcp serve``: the board's MCP server, with an embedded Redis when
``BB_REDIS_URL`` is unset."""

from __future__ import annotations

import argparse
import sys

from blackboard_mcp.settings import Settings, default_data_dir

from ._errors import ConfigurationError
from ._key_files import DEFAULT_SECRET_FILE, with_signing_key
from ._redis import check_redis_reachable, require_embedded_binaries
from ._tokens import issue_admin


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from blackboard_mcp.serve import ServeFailure, Serving

    chosen = {
        name: getattr(args, name)
        for name in ("host", "port", "workers")
        if getattr(args, name) is not None
    }
    settings = settings.model_copy(update=chosen)
    if settings.data_dir.exists() and not settings.data_dir.is_dir():
        raise ConfigurationError(
            f"BB_DATA_DIR {settings.data_dir} is a file, not a directory",
            hint="set BB_DATA_DIR to a directory (it is created if missing)",
        )
    if settings.redis_url:
        # Before anything is announced: a gateway on a Redis it cannot reach would look fine
        # and answer every call `unavailable`.
        check_redis_reachable(settings.redis_url)
    else:
        require_embedded_binaries()
    try:
        with Serving(settings) as serving:
            # Only now that the data dir, the port and Redis are ours: a start that fails
            # before this point creates no key, so the next one still shows the first token.
            keyed, created = with_signing_key(settings, create=True)
            print(f"blackboard-mcp: MCP endpoint {serving.endpoint}", flush=True)
            board_page = serving.endpoint.removesuffix("/").removesuffix("/mcp") + "/board"
            print(f"blackboard-mcp: board page {board_page} (sign in with a token)", flush=True)
            if serving.embedded or created:
                print(f"blackboard-mcp: data in {keyed.data_dir}", flush=True)
            if created:
                token = issue_admin(keyed, serving.redis_url, args.workspace, issued_by="serve")
                print(f"blackboard-mcp: signing key created at {keyed.jwt_secret_file}")
                print(
                    f"blackboard-mcp: admin token for workspace {args.workspace!r} (shown once; "
                    f"mint another with `{_mint_admin_hint(keyed, args.workspace)}`):"
                )
                print(token, flush=True)
            elif keyed.jwt_secret_file == keyed.data_dir / DEFAULT_SECRET_FILE:
                print(f"blackboard-mcp: admin tokens: `{_mint_admin_hint(keyed, args.workspace)}`")
            return serving.run(keyed)
    except ServeFailure as exc:
        print(f"blackboard-mcp: {exc}", file=sys.stderr, flush=True)
        return int(exc.exit_code)


def _mint_admin_hint(settings: Settings, workspace: str) -> str:
    prefix = "" if settings.data_dir == default_data_dir() else f"BB_DATA_DIR={settings.data_dir} "
    return f"{prefix}blackboard-mcp token issue --admin --workspace {workspace}"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: 1-65535, or 0 for any free one")
    return port


def _workers(text: str) -> int:
    try:
        workers = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes") from None
    if workers < 1:
        raise argparse.ArgumentTypeError("at least 1 worker process")
    return workers


def add_serve_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the board's MCP server (with an embedded Redis when BB_REDIS_URL is unset)",
    )
    serve.add_argument("--host", help="address to listen on (default: BB_HOST or 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=_port,
        help="port to listen on, 0 for any free one (default: BB_PORT, 8765)",
    )
    serve.add_argument(
        "--workers", type=_workers, help="server processes (default: BB_WORKERS or 1)"
    )
    serve.add_argument(
        "--workspace",
        default="default",
        help="workspace of the admin token printed on first start (default: default)",
    )
    serve.set_defaults(func=cmd_serve, parser=serve)
