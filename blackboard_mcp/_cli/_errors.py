"""The CLI's failures, and the one place where any failure becomes a short message and an exit code.

Exit codes: 0 success; 1 a failure at run time (Redis unreachable, an unhealthy board, a
refused token); 2 a usage or configuration problem (argparse's own code for bad arguments):
a malformed setting, no signing key, no Redis, a missing extra. (An embedded Redis that fails
to start is a run-time failure.) A supervisor should not
restart on 2 without a change of configuration.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from typing import ClassVar, NoReturn

from pydantic import ValidationError

from blackboard_mcp._composition import read_settings
from blackboard_mcp.errors import BoardError, StartupError
from blackboard_mcp.settings import Settings
from blackboard_mcp.store import failure_reason

PROG = "blackboard-mcp"
RUNTIME_FAILURE = 1
CONFIGURATION_FAILURE = 2


class Parser(argparse.ArgumentParser):
    """argparse's parser, refusing bad arguments the way every other failure is told: two
    lines, what was wrong and where to look, instead of the whole usage first (which, for an
    option the top level did not know, was the top level's and said nothing of the command)."""

    def error(self, message: str) -> NoReturn:
        self.exit(
            CONFIGURATION_FAILURE,
            f"{self.prog}: {' '.join(message.split())}\n"
            f"{PROG}: see `{self.prog} --help` for what it takes\n",
        )


class CliError(Exception):
    """Root of the CLI's own failures: what failed, what to do about it, and an exit code."""

    exit_code: ClassVar[int] = RUNTIME_FAILURE

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigurationError(CliError):
    """A setting is missing or malformed; running again unchanged will fail the same way."""

    exit_code = CONFIGURATION_FAILURE


class RedisUnreachable(CliError):
    """The board's Redis did not answer, or refused the connection."""


def _describe(exc: BaseException) -> tuple[str, str, int]:
    """(what failed, what to do, exit code) for any exception that reaches the CLI's edge."""
    if isinstance(exc, CliError):
        return exc.message, exc.hint, exc.exit_code
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        field = "_".join(str(part) for part in first["loc"])
        name = f"BB_{field.upper()}"
        # The value as given, unless the setting holds a secret.
        given = "" if _secret(field) else f" ({str(first.get('input'))[:80]!r})"
        return (
            f"the setting {name}{given} is invalid: {first['msg']}",
            f"fix or unset {name} (docs/operations.md lists every setting)",
            CONFIGURATION_FAILURE,
        )
    if isinstance(exc, BoardError | StartupError):
        return exc.message, exc.hint, RUNTIME_FAILURE
    return (
        f"unexpected error: {failure_reason(exc)}",
        f"run `{PROG} --debug ...` for the traceback and report it",
        RUNTIME_FAILURE,
    )


# What a shell reports for a program that SIGPIPE ended: how `| head` expects a writer to go.
OUTPUT_CLOSED = 128 + 13


def _output_closed() -> int:
    """The reader of our output went away (``| head``): end quietly, as a program ended by
    SIGPIPE does. Standard output now goes nowhere, so the interpreter's last flush of it
    cannot fail again on the way out."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return OUTPUT_CLOSED


def _secret(field: str) -> bool:
    """Whether a setting's value may hold a secret (a key, a password in a URL)."""
    declared = Settings.model_fields.get(field)
    if declared is None or "Secret" in str(declared.annotation):
        return True
    return any(word in field for word in ("secret", "password", "key", "url", "token"))


def _debugging(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "debug", False)) or (
        os.environ.get("BB_LOG_LEVEL", "").upper() == "DEBUG"
    )


def run_command(
    func: Callable[[argparse.Namespace, Settings], int], args: argparse.Namespace
) -> int:
    """Read the settings, then run one command with them; a failure (a malformed setting
    included) prints two lines on stderr, a traceback only when debugging."""
    try:
        settings = read_settings()
        return func(args, settings)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _output_closed()
    except Exception as exc:
        if _debugging(args):
            traceback.print_exc()
        message, hint, code = _describe(exc)
        # One line each, whatever the message carries (a server's log tail, say).
        print(f"{PROG}: {' '.join(message.split())}", file=sys.stderr)
        print(f"{PROG}: {' '.join(hint.split())}", file=sys.stderr)
        return code
