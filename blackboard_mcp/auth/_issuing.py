"""Issuing a token and keeping its record, as one step: the only way the board hands one out.

The CLI, the admin API, `serve`'s first admin token and delegation all come through here, so
every token the board issues is in the inventory (``_inventory.py``) until it expires.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._grants import Grant
from ._inventory import TokenInventory, TokenRecord
from ._tokens import TokenIssuer, grant_of


def record_of(grant: Grant, *, issued_by: str) -> TokenRecord:
    return TokenRecord(
        token_id=grant.token_id,
        subject=grant.subject,
        workspace=grant.workspace,
        read=grant.read_topics,
        write=grant.write_topics,
        capabilities=tuple(sorted(grant.capabilities)),
        secrets=tuple(sorted(grant.secrets)),
        issued_at=grant.issued_at,
        expires_at=grant.expires_at,
        issued_by=issued_by,
        parent=grant.ancestors[0] if grant.delegation else None,
        ancestors=grant.ancestors,
    )


async def issue_recorded(
    issuer: TokenIssuer,
    inventory: TokenInventory,
    *,
    subject: str,
    workspace: str,
    read: Sequence[str],
    write: Sequence[str],
    capabilities: Sequence[str],
    secrets: Sequence[str] = (),
    ttl_seconds: int,
    issued_by: str,
    parent: Grant | None = None,
) -> tuple[str, Grant]:
    """Sign a token and record it; the token is handed out only once its record is kept."""
    token = issuer.issue(
        subject=subject,
        workspace=workspace,
        read=read,
        write=write,
        capabilities=capabilities,
        secrets=secrets,
        ttl_seconds=ttl_seconds,
        act=None if parent is None else parent.act_claim(),
    )
    grant = grant_of(token)
    await inventory.record(record_of(grant, issued_by=issued_by))
    return token, grant
