"""auth's ``TokenInventory`` on the store's records: auth's typed records in, JSON kept.

auth decides what a record is and what its status means; the store keeps JSON in Redis and
knows nothing of tokens. This is where the two meet, for the gateway and the CLI alike: the
composition hands one to the gateway, and a command builds its own without loading the HTTP
edge.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from blackboard_mcp.auth import ListedToken, Status, TokenRecord
from blackboard_mcp.store import RedisTokenInventory


class RecordedTokens:
    def __init__(
        self, store: RedisTokenInventory, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._clock = clock

    async def record(self, record: TokenRecord) -> None:
        await self._store.record_json(
            record.workspace, record.token_id, record.expires_at, record.to_json()
        )

    async def find(self, workspace: str, token_id: str) -> TokenRecord | None:
        data = await self._store.find_json(workspace, token_id)
        record = _record(data)
        return record if record is not None and record.workspace == workspace else None

    async def listing(self, workspace: str, *, subject: str | None = None) -> list[ListedToken]:
        now = self._clock()
        out: list[ListedToken] = []
        for data, last_used, revoked in await self._store.all_json(workspace):
            record = _record(data)
            if record is None or record.workspace != workspace:
                continue
            if subject is not None and record.subject != subject:
                continue
            status: Status = (
                "revoked" if revoked else "expired" if record.expires_at < now else "active"
            )
            out.append(ListedToken(record, status, last_used))
        return out


def _record(data: dict[str, object] | None) -> TokenRecord | None:
    """A kept record, or None for one that is not (a record this code did not write)."""
    if data is None:
        return None
    try:
        return TokenRecord.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None
