"""The audit record of an admin action, shared by every admin endpoint."""

from __future__ import annotations

import time

from blackboard_mcp.auth import AuditRecord, AuditSink, Grant


async def audit_admin_action(
    audit: AuditSink, admin: Grant, tool: str, target: str, outcome: str = "ok"
) -> None:
    # An admin acts in its own workspace only, so that is the workspace affected.
    await audit.record(
        AuditRecord(
            at=time.time(),
            workspace=admin.workspace,
            subject=admin.subject,
            tool=tool,
            addresses=(target,),
            outcome=outcome,
            duration_ms=0.0,
            request_id="admin",
        )
    )
