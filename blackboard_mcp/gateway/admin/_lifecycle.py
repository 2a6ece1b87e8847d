"""``/admin/delete`` and ``/admin/retention``: an admin removes its workspace's data, or sets
how long it is kept. Audited like every admin call; answered in the admin error shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from blackboard_mcp.auth import AuditSink, Grant, WrongWorkspace
from blackboard_mcp.store import NAME_PATTERN, NOTE_ADDRESS_PATTERN, Board, DeleteReport

from .._errors import GatewayError
from ._audit import audit_admin_action
from ._bodies import _Body, parse_body, whole_number

Authenticate = Callable[[Request], Awaitable[Grant]]
Wrap = Callable[
    [Callable[[Request], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]
]


# The longest maximum age a retention setting takes: 100 years (longer is "forever": clear it).
MAX_AGE_SECONDS = 100 * 365 * 86400


# A maximum age in seconds: a whole number from 0 to MAX_AGE_SECONDS.
AgeSeconds = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=0, le=MAX_AGE_SECONDS),
    # Said outright: pydantic cannot tell the bounds through the validator above.
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_AGE_SECONDS}),
]


class InvalidDeleteBody(GatewayError):
    """The body of ``POST /admin/delete`` does not name what to delete."""

    hint = (
        'send a JSON object with exactly one of {"uri": URI}, {"topic": TOPIC} or '
        '{"everything": true}; without "confirm": true it only says what would go'
    )


class InvalidRetentionBody(GatewayError):
    """The body of ``POST /admin/retention`` is not a retention setting."""

    hint = (
        'send a JSON object {"max_age_seconds": INT or null, "topic"?: TOPIC, "confirm"?: '
        "BOOL}: null clears the setting, 0 on a topic keeps its notes whatever the "
        f"workspace's setting, at most {MAX_AGE_SECONDS} (100 years)"
    )


class DeleteBody(_Body):
    invalid = InvalidDeleteBody

    uri: str | None = Field(
        default=None, min_length=1, max_length=600, pattern=NOTE_ADDRESS_PATTERN
    )
    topic: str | None = Field(default=None, min_length=1, max_length=64, pattern=NAME_PATTERN)
    everything: bool = False
    # Without confirm (or with dry_run) a delete only says what would go.
    confirm: bool = False
    dry_run: bool = False

    @model_validator(mode="after")
    def _one_target(self) -> DeleteBody:
        if sum((self.uri is not None, self.topic is not None, self.everything)) != 1:
            raise ValueError("give exactly one of uri, topic or everything")
        return self


class RetentionBody(_Body):
    invalid = InvalidRetentionBody

    topic: str | None = Field(default=None, min_length=1, max_length=64, pattern=NAME_PATTERN)
    max_age_seconds: AgeSeconds | None
    # A setting that would delete notes at the next sweep is only previewed without it.
    confirm: bool = False


def lifecycle_routes(
    *, authenticate: Authenticate, board: Board, audit: AuditSink, wrap: Wrap
) -> list[Route]:
    async def delete(request: Request) -> Response:
        admin = await authenticate(request)
        body = await parse_body(request, DeleteBody)
        ws = admin.workspace
        if body.uri is not None and not body.uri.startswith(f"bb://{ws}/"):
            raise WrongWorkspace(
                f"the admin token is for workspace {ws!r}: it deletes only there",
                hint=f"delete an address of bb://{ws}/, or use that workspace's admin token",
            )
        if body.dry_run or not body.confirm:
            plan = await board.plan_delete(workspace=ws, topic=body.topic, uri=body.uri)
            return JSONResponse(_preview(plan, "delete"))
        report = await board.delete(
            author=admin.subject, workspace=ws, topic=body.topic, uri=body.uri
        )
        await audit_admin_action(
            audit, admin, "admin.delete", report.target, f"deleted {report.count}"
        )
        return JSONResponse({"target": report.target, "deleted": report.count, "uris": report.uris})

    async def show_retention(request: Request) -> Response:
        admin = await authenticate(request)
        policy = await board.retention(admin.workspace)
        return JSONResponse({"workspace": admin.workspace, **policy.as_json()})

    async def set_retention(request: Request) -> Response:
        admin = await authenticate(request)
        body = await parse_body(request, RetentionBody)
        plan = await board.plan_retention(
            workspace=admin.workspace, topic=body.topic, max_age_seconds=body.max_age_seconds
        )
        if plan.count and not body.confirm:
            return JSONResponse(
                {"workspace": admin.workspace, **_preview(plan, "set this maximum age")}
            )
        policy = await board.set_retention(
            workspace=admin.workspace, topic=body.topic, max_age_seconds=body.max_age_seconds
        )
        where = f"bb://{admin.workspace}/" + (f"{body.topic}/" if body.topic else "")
        setting = "cleared" if body.max_age_seconds is None else f"{body.max_age_seconds}s"
        await audit_admin_action(audit, admin, "admin.retention", where, f"max age {setting}")
        answer = {"workspace": admin.workspace, **policy.as_json()}
        if plan.count:
            # Confirmed: how many notes the next sweep will delete.
            answer["will_delete"] = plan.count
        return JSONResponse(answer)

    return [
        Route("/admin/delete", wrap(delete), methods=["POST"]),
        Route("/admin/retention", wrap(show_retention), methods=["GET"]),
        Route("/admin/retention", wrap(set_retention), methods=["POST"]),
    ]


def _preview(plan: DeleteReport, action: str) -> dict[str, Any]:
    """What an unconfirmed destructive call answers: how many notes it would delete and the
    first addresses; nothing was changed."""
    return {
        "target": plan.target,
        "applied": False,
        "would_delete": plan.count,
        "uris": plan.uris,
        "hint": f'nothing was changed: send the same body with "confirm": true to {action}',
    }
