"""``/board``: a page for the people who run a fleet, and the small API behind it.

The page is static (HTML, CSS, script modules, all served from the package; nothing external).
It sends the token it was given as a bearer header on every request; the token never
appears in a URL. The API answers through the same ToolCaller as MCP, so a person sees
exactly what their token lets an agent see, and every read is audited: a tool call as that
tool, each other endpoint under its name in contracts/board.tb (``board/topics``,
``board/activity``, ``board/events``), admitted on what the contract states for it:

- ``POST /board/api/call`` ``{tool, arguments}``: one of the three read tools, or
  ``link_state`` with ``remove: true`` (withdrawing a link, for a token that may);
- ``GET /board/api/topics``: readable topics and their note counts;
- ``GET /board/api/events``: server-sent events of the changes the token may see, from the
  same change-log reader as subscriptions/listen (read with fetch(), which can send the
  Authorization header that EventSource cannot);
- ``GET /board/api/audit``: the audit tail, for admin tokens (no operator's file path in it).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import PurePosixPath
from typing import Any, Protocol, runtime_checkable

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route, Router

from blackboard_mcp.auth import (
    AuditRecord,
    AuditSink,
    Grant,
    TokenRevoked,
    TokenVerifier,
    require_admin,
)
from blackboard_mcp.store import Board

from .._calls import CallOutcome, ToolCaller
from .._context import current_grant, current_request_id
from .._edge import BearerAuth, BodyLimit
from .._errors import ERROR_CODES, GatewayError, tool_error
from .._oauth_metadata import ProtectedResource
from .._tools import READ_TOOLS
from ..listening import IDLE, ChangeHub

# The endpoints' names in contracts/board.tb and in the audit.
TOPICS = "board/topics"
ACTIVITY = "board/activity"
EVENTS = "board/events"
AUDIT = "board/audit"
KEEP_ALIVE_SECONDS = 15.0
AUDIT_TAIL = 50
_API_BODY_BYTES = 64 * 1024
_STATUS = {
    "invalid_argument": 400,
    "too_large": 413,
    "not_found": 404,
    "forbidden": 403,
    "unauthenticated": 401,
    "rate_limited": 429,
    "overloaded": 503,
    "unavailable": 503,
}
# No inline script or style, nothing from elsewhere, no framing, no form posts.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = {
    "content-security-policy": CSP,
    # frame-ancestors says it to today's browsers; X-Frame-Options to older ones.
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
# The API's answers hold notes and audit records: never kept by a cache, never sniffed.
_API_HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff"}
# A module script must come with a JavaScript type: the browser runs no other.
_MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@runtime_checkable
class AuditTail(Protocol):
    async def tail(self, workspace: str, count: int) -> list[AuditRecord]: ...


class NotAReadTool(GatewayError):
    """The board page reads; the one write it makes is withdrawing a link."""

    hint = "use get_state, list_keys or search_keys (or link_state with remove: true)"


def _board_folder() -> Traversable:
    return resources.files("blackboard_mcp.gateway.page") / "static"


def _asset(name: str) -> bytes:
    return (_board_folder() / name).read_bytes()


def static_files() -> dict[str, tuple[bytes, str]]:
    """The page's scripts, style sheet and icon, by the path under /board/static/ they are
    served at (``board.js``, ``modules/notes.js``), with their media types: every file of a
    known type in the package's board folder, so that a module added there is served, and
    nothing else is."""
    found: dict[str, tuple[bytes, str]] = {}

    def gather(folder: Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                gather(entry, f"{prefix}{entry.name}/")
            elif (media := _MEDIA_TYPES.get(PurePosixPath(entry.name).suffix)) is not None:
                found[prefix + entry.name] = (entry.read_bytes(), media)

    gather(_board_folder(), "")
    return found


def _json(body: Mapping[str, Any], status: int = 200) -> Response:
    return Response(
        orjson.dumps(dict(body)),
        status_code=status,
        media_type="application/json",
        headers=_API_HEADERS,
    )


def _answer(outcome: CallOutcome) -> Response:
    if outcome.is_error:
        code = outcome.body["error"]["code"]
        return _json(outcome.body, _STATUS.get(code, 500))
    return _json(outcome.body)


def _error(exc: Exception) -> Response:
    body = tool_error(exc, current_request_id.get())
    return _json(body, _STATUS.get(body["error"]["code"], 500))


def _event(change_fields: Mapping[str, Any]) -> bytes:
    return b"event: change\ndata: " + orjson.dumps(dict(change_fields)) + b"\n\n"


# The change log entries the activity chart reads at most (newest first): an hour of a
# busy board's writes past this is drawn from the newest ones, and says so.
ACTIVITY_CHANGES = 10_000
ACTIVITY_MINUTES = 60


ACTIVITY_AUDIT_RECORDS = 2000


def refused_in_the_last_hour(records: Sequence[AuditRecord], now: float) -> dict[str, int]:
    """Calls of the last hour that did not succeed, counted by their error code.

    A refused or failed call records its error code; a successful one records ``ok``, or,
    for the CLI's and the admin API's work, what it did ("deleted 3", "max age 30d"): that
    is work done, not a call left unanswered, so only the error codes count."""
    counts: dict[str, int] = {}
    for record in records:
        if record.at < now - ACTIVITY_MINUTES * 60:
            continue
        if record.outcome in ERROR_CODES:
            counts[record.outcome] = counts.get(record.outcome, 0) + 1
    return dict(sorted(counts.items()))


_EXPORTED = re.compile(r"(exported \d+) to (.+)")


def outcome_for_the_page(outcome: str) -> str:
    """An audit outcome without the operator's file paths: the CLI records where it wrote
    ("exported 213 to /home/op/dump.jsonl"), which is the operator's to know, not the page's.
    An export names no more than "a file"; any other word that is a path is replaced too."""
    exported = _EXPORTED.fullmatch(outcome)
    if exported:
        where = exported.group(2)
        return f"{exported.group(1)} to " + ("stdout" if where == "stdout" else "a file")
    return " ".join("a file" if _is_path(word) else word for word in outcome.split(" "))


def _is_path(word: str) -> bool:
    return ("/" in word or "\\" in word) and not word.startswith("bb://")


def writes_per_minute(
    changes: list[dict[str, str]], readable: Callable[[str], bool], now: float
) -> dict[str, Any]:
    """Writes per minute over the last hour, per topic and per author, of the topics
    ``readable`` allows; minute 0 is the oldest, ACTIVITY_MINUTES - 1 the current one."""
    start_ms = (int(now) // 60 - ACTIVITY_MINUTES + 1) * 60_000
    by_topic: dict[str, list[int]] = {}
    by_author: dict[str, list[int]] = {}
    oldest_seen = None
    for change in changes:
        at = int(change.get("at") or 0)
        oldest_seen = at
        if at < start_ms:
            break
        topic = change.get("uri", "").split("/", 4)[3:4]
        if not topic or not readable(topic[0]):
            continue
        minute = min((at - start_ms) // 60_000, ACTIVITY_MINUTES - 1)
        for counts, name in ((by_topic, topic[0]), (by_author, change.get("author", ""))):
            counts.setdefault(name, [0] * ACTIVITY_MINUTES)[minute] += 1
    complete = len(changes) < ACTIVITY_CHANGES or (oldest_seen or 0) < start_ms
    return {
        "start_ms": start_ms,
        "minutes": ACTIVITY_MINUTES,
        "by_topic": dict(sorted(by_topic.items())),
        "by_author": dict(sorted(by_author.items())),
        "complete": complete,
    }


async def _admitted(_board: Board, _grant: Grant) -> dict[str, Any]:
    return {}


def _is_admin(grant: Grant) -> bool:
    """What ``require_admin`` honours: an admin token with fewer than every topic is none, so
    the page offers it no admin panel (whose every call would be refused)."""
    return grant.has_capability("admin") and grant.holds_every_topic


def board_routes(
    *,
    caller: ToolCaller,
    hub: ChangeHub,
    verifier: TokenVerifier,
    audit: AuditSink,
    resource: ProtectedResource,
) -> Sequence[BaseRoute]:
    page = _asset("index.html")
    files = static_files()

    async def index(_request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers=_SECURITY_HEADERS)

    async def asset(request: Request) -> Response:
        served = files.get(request.path_params["name"])
        if served is None:
            return Response(status_code=404, headers=_SECURITY_HEADERS)
        content, media_type = served
        return Response(content, media_type=media_type, headers=_SECURITY_HEADERS)

    async def call(request: Request) -> Response:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("arguments", {}), dict):
            return _error(NotAReadTool('send {"tool": ..., "arguments": {...}}'))
        tool = body.get("tool")
        arguments = body.get("arguments", {})
        # One write besides the reads: withdrawing a link, under link_state's own scopes.
        withdrawal = tool == "link_state" and arguments.get("remove") is True
        if tool not in READ_TOOLS and not withdrawal:
            return _error(NotAReadTool(f"the board page does not call {tool!r}"))
        outcome = await caller.call(
            str(tool), arguments, current_grant.get(), current_request_id.get()
        )
        return _answer(outcome)

    async def topics(_request: Request) -> Response:
        async def readable(board: Board, grant: Grant) -> dict[str, Any]:
            found = await board.topics(workspace=grant.workspace, readable=grant.can_read)
            return {
                "workspace": grant.workspace,
                "admin": _is_admin(grant),
                "topics": [{"topic": t, "notes": n} for t, n in found],
                # Who is signed in and what the token allows: the page says so at once.
                "who": {
                    "subject": grant.subject,
                    # The page asks before an admin revokes its own token by this id.
                    "token_id": grant.token_id,
                    "read": list(grant.read_topics),
                    "write": list(grant.write_topics),
                    "capabilities": sorted(grant.capabilities),
                    "expires_at_ms": int(grant.expires_at * 1000),
                },
            }

        outcome = await caller.serve(
            TOPICS, current_grant.get(), current_request_id.get(), readable
        )
        return _answer(outcome)

    async def activity(_request: Request) -> Response:
        async def per_minute(board: Board, grant: Grant) -> dict[str, Any]:
            return writes_per_minute(
                await board.changes(grant.workspace, ACTIVITY_CHANGES), grant.can_read, time.time()
            )

        grant = current_grant.get()
        outcome = await caller.serve(ACTIVITY, grant, current_request_id.get(), per_minute)
        if outcome.is_error or grant is None or not _is_admin(grant):
            return _answer(outcome)
        # An admin also sees the calls refused or failed in the last hour, by code, from the
        # workspace's audit stream (the metrics are per process; the audit is the board's).
        body = dict(outcome.body)
        if isinstance(audit, AuditTail):
            try:
                records = await audit.tail(grant.workspace, ACTIVITY_AUDIT_RECORDS)
            except Exception as exc:
                return _error(exc)
            body["outcomes"] = refused_in_the_last_hour(records, time.time())
        return _json(body)

    async def audit_tail(_request: Request) -> Response:
        async def last_calls(_board: Board, grant: Grant) -> dict[str, Any]:
            if not isinstance(audit, AuditTail):
                raise NotAReadTool("no audit log here")
            # The contract asks for the admin capability; an admin's token must also hold
            # every topic (SECURITY.md), which no contract line can say.
            require_admin(grant)
            records = await audit.tail(grant.workspace, AUDIT_TAIL)
            return {
                "records": [
                    {
                        "at": r.at,
                        "subject": r.subject,
                        "tool": r.tool,
                        "outcome": outcome_for_the_page(r.outcome),
                        "addresses": list(r.addresses),
                        "ms": r.duration_ms,
                    }
                    for r in records
                ]
            }

        outcome = await caller.serve(
            AUDIT, current_grant.get(), current_request_id.get(), last_calls
        )
        return _answer(outcome)

    async def events(_request: Request) -> Response:
        grant = current_grant.get()
        outcome = await caller.serve(EVENTS, grant, current_request_id.get(), _admitted)
        if outcome.is_error:
            return _answer(outcome)
        assert grant is not None
        try:
            listener = await hub.join(grant, notes=frozenset(), topics=None)
        except Exception as exc:
            return _error(exc)
        # A page that stopped reading gives its place back at once.
        listener.on_drop = lambda: hub.leave(listener)

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield b": listening\n\n"
                while (left := grant.expires_at - time.time()) > 0:
                    try:
                        notice = await hub.next_change(
                            listener, wait_seconds=min(KEEP_ALIVE_SECONDS, left)
                        )
                    except TokenRevoked:
                        return
                    if notice is IDLE:
                        yield b": keep-alive\n\n"
                        continue
                    if notice is None or listener.dropped:
                        return
                    change = notice.change
                    yield _event(
                        {
                            "seq": change.seq,
                            "op": change.op,
                            "uri": change.uri,
                            "version": change.version,
                            "author": change.author,
                            "at_ms": change.at_ms,
                        }
                    )
            finally:
                hub.leave(listener)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={**_API_HEADERS, "x-accel-buffering": "no"},
        )

    api = BodyLimit(
        BearerAuth(
            _api_app(call=call, topics=topics, audit=audit_tail, events=events, activity=activity),
            verifier=verifier,
            resource=resource,
        ),
        max_bytes=_API_BODY_BYTES,
    )
    return [
        Route("/board", index, methods=["GET"]),
        Route("/board/static/{name:path}", asset, methods=["GET"]),
        Mount("/board/api", app=api),
    ]


def _api_app(**endpoints: Any) -> Router:
    return Router(
        routes=[
            Route("/call", endpoints["call"], methods=["POST"]),
            Route("/topics", endpoints["topics"], methods=["GET"]),
            Route("/audit", endpoints["audit"], methods=["GET"]),
            Route("/events", endpoints["events"], methods=["GET"]),
            Route("/activity", endpoints["activity"], methods=["GET"]),
        ]
    )
