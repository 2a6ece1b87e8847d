"""What health and readiness know of one Redis node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._board_client import BoardClient
from ._location import failure_reason
from ._search_index import index_ready


@dataclass(frozen=True)
class NodeReport:
    """One Redis node as health and readiness see it."""

    address: str
    role: str
    up: bool
    index: str
    used_memory_bytes: int = 0
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node": self.address,
            "role": self.role,
            "redis": "ok" if self.up else "unavailable",
            "index": self.index,
            "used_memory_bytes": self.used_memory_bytes,
        }
        if self.reason:
            out["error"] = self.reason
        return out


async def node_report(
    client: BoardClient, address: str, role: str, index: str | None
) -> NodeReport:
    try:
        async with client.operation():
            memory = await client.redis.info("memory")
            if index is None:
                state = "-"
            elif await index_ready(client, index):
                state = "ready"
            else:
                state = "building"
    except Exception as exc:  # a report, not a failure: the node is down and says why
        return NodeReport(address, role, False, "unknown", reason=failure_reason(exc))
    return NodeReport(address, role, True, state, int(memory.get("used_memory", 0)))
