"""The five tools' requests: each call's arguments checked once, before any I/O, into a
typed value the board's operations take.

A request names the addresses it reads and writes (``reads``, ``writes``), which is all the
gateway needs to check a token's topics. Each class's fields are the tool's arguments as the
store uses them; their defaults and their ``Literal`` choices are what ``tools/list``
announces (gateway/_schemas.py reads them from here), and ``contracts/board.tb`` names the
arguments and their wire types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._link import LinkState
from ._reads import MAX_URIS, GetState, ListKeys
from ._search import SearchKeys
from ._update import UpdateState

ToolRequest = UpdateState | GetState | ListKeys | SearchKeys | LinkState

REQUESTS: dict[str, type[UpdateState | GetState | ListKeys | SearchKeys | LinkState]] = {
    "update_state": UpdateState,
    "get_state": GetState,
    "list_keys": ListKeys,
    "search_keys": SearchKeys,
    "link_state": LinkState,
}
_PARSERS: dict[str, Callable[[Mapping[str, Any]], ToolRequest]] = {
    name: cls.parse for name, cls in REQUESTS.items()
}


def parse_request(tool: str, args: Mapping[str, Any]) -> ToolRequest:
    """``args`` of a call to ``tool`` (one of ``REQUESTS``), checked; a null is left out."""
    return _PARSERS[tool](args)


__all__ = [
    "MAX_URIS",
    "REQUESTS",
    "GetState",
    "LinkState",
    "ListKeys",
    "SearchKeys",
    "ToolRequest",
    "UpdateState",
    "parse_request",
]
