"""One error root: every failure a caller can meet carries one of the documented codes.

The store's, auth's and the gateway's errors are all ``BoardError``s, mapped to a tool error
in one place; the codes come from one closed list, which the README's error table shows,
and a start-up failure is not among the errors a call can raise.
"""

from __future__ import annotations

import re
from pathlib import Path

import blackboard_mcp.gateway  # noqa: F401  (loads every part's error classes)
from blackboard_mcp.auth import AuthError, TopicNotReadable
from blackboard_mcp.errors import BoardError, StartupError, codes_in_use, error_codes
from blackboard_mcp.errors import Overloaded as Busy
from blackboard_mcp.gateway import ERROR_CODES, GatewayError
from blackboard_mcp.gateway._errors import TooManyInFlight, tool_error
from blackboard_mcp.store import EmbeddedRedisError, Overloaded, StoreError, TooLarge

README = Path(__file__).resolve().parent.parent / "README.md"


def test_every_error_class_carries_a_code_of_the_closed_list() -> None:
    assert codes_in_use() <= set(error_codes())
    assert error_codes() == ERROR_CODES


def test_the_readme_error_table_lists_exactly_the_codes() -> None:
    table = README.read_text().split("| code | when |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.MULTILINE)
    assert sorted(listed) == sorted(error_codes())


def test_the_three_parts_errors_share_one_root() -> None:
    for kind in (StoreError, AuthError, GatewayError):
        assert issubclass(kind, BoardError)
    # One class for a busy gateway, whichever part noticed it.
    assert issubclass(TooManyInFlight, Busy) and issubclass(Overloaded, Busy)
    assert Overloaded("busy").code == TooManyInFlight("busy").code == "overloaded"


def test_a_start_up_failure_is_not_a_call_error() -> None:
    assert issubclass(EmbeddedRedisError, StartupError)
    assert not issubclass(EmbeddedRedisError, BoardError)
    # Were one to reach a tool call's edge, it would be an internal error, never its text.
    body = tool_error(EmbeddedRedisError("redis-server crashed at /srv/x"), "r1")["error"]
    assert body["code"] == "internal" and "/srv/x" not in body["message"]


def test_any_part_s_error_becomes_code_message_hint_and_plain_details() -> None:
    for exc, code in (
        (TooLarge("body over 1 MiB", limit=1048576), "too_large"),
        (TopicNotReadable("the token may not read topic 'ops'", topic="ops"), "forbidden"),
        (TooManyInFlight("1024 calls in hand", retry_after=0.5), "overloaded"),
    ):
        body = tool_error(exc, "r1")["error"]
        assert body["code"] == code and body["message"] == exc.message and body["hint"]
        assert {k: v for k, v in body.items() if k not in ("code", "message", "hint")} == {
            k: v for k, v in exc.details.items()
        }
