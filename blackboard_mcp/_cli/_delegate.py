"""``blackboard-mcp token delegate``: narrow a token for a sub-agent, through a gateway.

The holder needs no signing key: the parent token (from ``BB_TOKEN``, else stdin, so that it
never appears in a process list) is exchanged at the gateway's ``POST /oauth/token`` (RFC
8693; gateway/admin/_token_exchange.py), and the child token is printed on stdout. A refusal is
the RFC's error code and description on stderr, exit 2; a gateway that cannot be reached,
exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

from blackboard_mcp.settings import Settings

from ._durations import FORMAT as DURATION_FORMAT
from ._durations import parse_duration
from ._errors import CliError
from ._health import gateway_base

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
_TIMEOUT_SECONDS = 10.0


class GatewayUnreachable(CliError):
    """The gateway did not answer the exchange."""


def cmd_token_delegate(args: argparse.Namespace, settings: Settings) -> int:
    parent = os.environ.get("BB_TOKEN", "").strip()
    if not parent and not sys.stdin.isatty():
        parent = sys.stdin.read(16_384).strip()
    if not parent:
        print(
            "refused: no token to delegate from: set BB_TOKEN or pipe the token on stdin",
            file=sys.stderr,
        )
        return 2
    base = gateway_base(
        args.url or settings.public_url or f"http://{settings.host}:{settings.port}"
    )
    form = {
        "grant_type": EXCHANGE,
        "subject_token": parent,
        "subject_token_type": ACCESS_TOKEN,
    }
    if args.scope is not None:
        form["scope"] = args.scope
    if args.ttl is not None:
        form["expires_in"] = str(args.ttl)
    request = urllib.request.Request(
        base + "/oauth/token",
        data=urllib.parse.urlencode(form).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            refusal = json.loads(exc.read())
            print(
                f"refused: {refusal['error']}: {refusal.get('error_description', '')}",
                file=sys.stderr,
            )
        except (ValueError, KeyError, TypeError):
            print(f"refused: the gateway answered HTTP {exc.code}", file=sys.stderr)
        return 2 if 400 <= exc.code < 500 else 1
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise GatewayUnreachable(
            f"the gateway at {base} could not be reached ({reason})",
            hint="pass --url with the gateway's address (what `serve` prints)",
        ) from None
    print(answer["access_token"])
    print(
        f"delegated: {answer.get('scope', '')}, for {answer.get('expires_in')} s",
        file=sys.stderr,
    )
    return 0


def add_delegate_command(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    delegate = tsub.add_parser(
        "delegate",
        help="print a narrower token for a sub-agent, made from yours (BB_TOKEN or stdin)",
        description="Exchange your token (BB_TOKEN, else stdin) at the gateway for a token "
        "that holds a subset of it (RFC 8693). Scope words: read:<topic>, write:<topic>, "
        "board_read, board_write, file_read, secret:<handle>; without --scope, everything "
        "yours holds but admin. Revoking your token revokes the new one.",
    )
    delegate.add_argument(
        "--scope", help="space-separated scope words, e.g. 'read:research board_read'"
    )
    delegate.add_argument(
        "--ttl",
        type=parse_duration,
        default=None,
        help=f"lifetime, {DURATION_FORMAT}; default 1h, never past your token's expiry",
    )
    delegate.add_argument(
        "--url", help="the gateway (default: BB_PUBLIC_URL, else http://BB_HOST:BB_PORT)"
    )
    delegate.set_defaults(func=cmd_token_delegate, parser=delegate)
