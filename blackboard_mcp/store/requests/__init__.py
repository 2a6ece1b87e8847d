"""The five tools' requests: each call's arguments checked once, before any I/O, into a
typed value the board's operations take.

A request names the addresses it reads and writes (``reads``, ``writes``), which is all the
gateway needs to check a token's topics. Each class's fields are the tool's arguments as the
store uses them; their defaults and their ``Literal`` choices are what ``tools/list``
announces (each tool's spec, gateway/_tools.py, names its class), and ``contracts/board.tb``
names the arguments and their wire types.
"""

from __future__ import annotations

from ._link import LinkState
from ._reads import MAX_URIS, GetState, ListKeys
from ._search import SearchKeys
from ._update import UpdateState

ToolRequest = UpdateState | GetState | ListKeys | SearchKeys | LinkState


__all__ = [
    "MAX_URIS",
    "GetState",
    "LinkState",
    "ListKeys",
    "SearchKeys",
    "ToolRequest",
    "UpdateState",
]
