"""``blackboard-mcp health``: the board's Redis and index, and a gateway's probes over plain
HTTP, with the standard library.

`blackboard-mcp health` runs where operators are (a container, a bastion), where only the
package's own dependencies are installed; httpx is a test dependency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.error
import urllib.request

from blackboard_mcp.settings import Settings

from ._errors import ConfigurationError, RedisUnreachable
from ._redis import redis_failures, redis_url

PROBES = ("/healthz", "/readyz")
_TIMEOUT_SECONDS = 5.0


def _status(url: str) -> tuple[str, bool]:
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_SECONDS) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:  # a 503 is an answer, not a failure to connect
        status = exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return f"unreachable ({reason})", False
    return str(status), status == 200


def gateway_base(url: str) -> str:
    """The gateway's base URL from what people paste: the endpoint `serve` prints
    (``.../mcp/``), a base URL, or ``host:port`` without a scheme."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    base = text.rstrip("/")
    if base.endswith("/mcp"):
        base = base[: -len("/mcp")]
    return base


def probe_gateway(base_url: str) -> list[tuple[str, str, bool]]:
    """(probe path, what it answered, healthy) for each of the gateway's probes."""
    base = gateway_base(base_url)
    return [(path, *_status(base + path)) for path in PROBES]


def cmd_health(args: argparse.Namespace, settings: Settings) -> int:
    """Board health for a human: exits 1 when anything is unhealthy."""
    healthy = True
    if args.url:
        for path, answer, ok in probe_gateway(args.url):
            print(f"gateway {path}: {answer}")
            healthy = healthy and ok
    try:
        url = redis_url(settings)
    except ConfigurationError:
        if not args.url:
            raise
        return 0 if healthy else 1  # the gateway alone was asked about
    try:
        with redis_failures(url):
            report = asyncio.run(_board_health(url, settings))
    except RedisUnreachable as exc:
        # Still a report, on one line: what is down and what to check.
        print(json.dumps({"redis": "unavailable", "error": exc.message, "hint": exc.hint}))
        return 1
    print(json.dumps(report, indent=2))
    healthy = healthy and report.get("redis") == "ok" and report.get("index") == "ready"
    return 0 if healthy else 1


async def _board_health(url: str, settings: Settings) -> dict[str, object]:
    from blackboard_mcp._composition import open_board

    board = open_board(settings, url=url)
    try:
        return await board.health()
    finally:
        await board.close()


def add_health_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    health = sub.add_parser("health", help="print board health; non-zero exit when unhealthy")
    health.add_argument(
        "--url",
        help="also check a gateway: its base URL, the endpoint serve prints, or HOST:PORT",
    )
    health.set_defaults(func=cmd_health, parser=health)
