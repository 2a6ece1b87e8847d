"""One tool call from grant to result: refuse early, run the handler, audit and measure."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from blackboard_mcp.auth import (
    AuditRecord,
    AuditSink,
    Authorizer,
    Grant,
    Manifest,
    TokenRevoked,
    Unauthenticated,
)
from blackboard_mcp.store import Admission, Board, RedisCallAdmission, parse_request

from ._errors import RateLimited, TooManyInFlight, UnknownArgument, UnknownTool, tool_error
from ._metrics import GatewayMetrics
from ._schemas import ARGUMENTS
from ._tools import GATED, HANDLERS, CallScope, Handler, scope_of

log = logging.getLogger(__name__)

# What an `overloaded` answer suggests: calls in hand are answered within about a second.
OVERLOADED_RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True)
class CallOutcome:
    body: Mapping[str, Any]
    is_error: bool

    def wire(self) -> dict[str, Any]:
        """The outcome as a CallToolResult's wire dict: the body as JSON text and structured."""
        body = dict(self.body)
        return {
            "content": [{"type": "text", "text": orjson.dumps(body).decode()}],
            "structuredContent": body,
            "isError": self.is_error,
        }


@dataclass(frozen=True)
class AuditedAs:
    """The operation and addresses a call's audit record and metrics name instead of its own."""

    tool: str
    addresses: tuple[str, ...]


_ADMISSION_REFUSALS = (TokenRevoked, RateLimited)
UNKNOWN_TOOL_SERIES = "unknown"


def _refuse_if_revoked(admission: Admission) -> None:
    if admission.revoked:
        raise TokenRevoked("this token has been revoked")


def _refuse_if_limited(admission: Admission, grant: Grant) -> None:
    if admission.retry_after is not None:
        raise RateLimited(
            f"rate limit reached for {grant.subject}", retry_after=admission.retry_after
        )


def _refuse_unless_admitted(admission: Admission, grant: Grant) -> None:
    _refuse_if_revoked(admission)
    _refuse_if_limited(admission, grant)


class ToolCaller:
    """Runs tool calls for the MCP server.

    Every refusal happens before the handler, except the admission of the calls in GATED
    (revocation, rate limit): their handler sends it in its first round trip to Redis, and
    it is judged there before anything is written or anything read is used.
    """

    def __init__(
        self,
        *,
        board: Board,
        manifest: Manifest,
        authorizer: Authorizer,
        admission: RedisCallAdmission,
        audit: AuditSink,
        metrics: GatewayMetrics,
        max_in_flight: int = 1024,
    ) -> None:
        self._board = board
        self._manifest = manifest
        self._authorizer = authorizer
        self._admission = admission
        self._audit = audit
        self._metrics = metrics
        self._max_in_flight = max_in_flight
        self._in_flight = 0

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        grant: Grant | None,
        request_id: str,
        *,
        run: Handler | None = None,
        audited_as: AuditedAs | None = None,
    ) -> CallOutcome:
        """Run ``tool``; ``run`` stands in for its handler where the same call is answered in
        another shape (resources/read is get_state's call: same checks, same refusals).

        ``audited_as`` names the operation in the audit record and the metrics where the
        call only lends its checks to another (a listen is admitted by get_state's)."""
        started = time.perf_counter()
        scope: CallScope | None = None
        outcome = "ok"
        handler_ran = False
        admitted = False
        try:
            # Counted here, on the one path both the direct and the SDK requests take. Past
            # the limit a call is refused at once: queued, it would wait behind the others
            # for a Redis connection and be answered late or not at all.
            if self._in_flight >= self._max_in_flight:
                raise TooManyInFlight(
                    f"this gateway process has {self._max_in_flight} calls in hand",
                    retry_after=OVERLOADED_RETRY_AFTER_SECONDS,
                )
            self._in_flight += 1
            admitted = True
            if grant is None:
                raise Unauthenticated("no access token")
            requirements = self._requirements(tool)
            if not ARGUMENTS[tool].issuperset(arguments):
                unknown = sorted(set(arguments) - ARGUMENTS[tool])
                raise UnknownArgument(
                    f"{tool} does not take {', '.join(unknown)}", argument=unknown[0]
                )
            # Present means given with a value: a null is the same as leaving it out.
            args = {k: v for k, v in arguments.items() if v is not None}
            present = args.keys()
            request = parse_request(tool, args)
            scope = scope_of(request, grant, per_item=run is None and tool == "get_state")
            gated = run is None and tool in GATED
            admission = None if gated else await self._admission.admit(grant)
            if admission is not None:
                _refuse_if_revoked(admission)
            self._authorizer.authorize(
                grant,
                requirements,
                arguments_present=present,
                workspace=scope.workspace,
                read_topics=scope.read_topics,
                write_topics=scope.write_topics,
                corrected=scope.corrected,
                reads_catch_up_only=scope.reads_catch_up_only,
            )
            if admission is not None:
                _refuse_if_limited(admission, grant)
            handler_ran = True
            if gated:
                # The same admission, judged in the write's first round trip: refused
                # there, nothing is written and nothing read is answered.
                gate = self._admission.gate(grant, lambda v: _refuse_unless_admitted(v, grant))
                result = await self._manifest.handler(tool)(self._board, grant, request, gate)
            else:
                handler = run or self._manifest.handler(tool)
                result = await handler(self._board, grant, request)
            if scope.refused:
                # Answered, but the call asked for what the token may not read: the audit
                # and the metrics count it as a refusal.
                outcome = "forbidden"
                self._metrics.refused.labels(outcome).inc()
            return CallOutcome(result, False)
        except Exception as exc:
            body = tool_error(exc, request_id)
            outcome = body["error"]["code"]
            if outcome == "conflict":
                self._metrics.conflicts.inc()
            if not handler_ran or isinstance(exc, _ADMISSION_REFUSALS):
                self._metrics.refused.labels(outcome).inc()
            return CallOutcome(body, True)
        finally:
            if admitted:
                self._in_flight -= 1
            elapsed = time.perf_counter() - started
            # The client names the tool: a name that is none of ours would add a series to
            # /metrics per name sent, so every such call counts under one.
            if audited_as is not None:
                series = audited_as.tool
            else:
                series = tool if tool in HANDLERS else UNKNOWN_TOOL_SERIES
            self._metrics.calls.labels(series, outcome).inc()
            self._metrics.latency.labels(series).observe(elapsed)
            # Refusals and errors at INFO, the rest at DEBUG: the audit stream has every call,
            # and a log line per successful call is a cost paid on the hot path.
            level = logging.DEBUG if outcome == "ok" else logging.INFO
            if log.isEnabledFor(level):
                log.log(
                    level,
                    "tool call %s %s",
                    tool,
                    outcome,
                    extra={
                        "request_id": request_id,
                        "sub": grant.subject if grant else None,
                        "ws": grant.workspace if grant else None,
                        "tool": tool,
                        "outcome": outcome,
                        "ms": round(elapsed * 1000, 3),
                    },
                )
            addresses = scope.addresses if scope else ()
            if audited_as is not None:
                tool, addresses = audited_as.tool, audited_as.addresses
            await self._record(grant, tool, addresses, outcome, elapsed, request_id)

    def _requirements(self, tool: str) -> Any:
        if tool not in HANDLERS:
            raise UnknownTool(f"there is no tool {tool!r}")
        return self._manifest.requirements_for(tool)

    async def _record(
        self,
        grant: Grant | None,
        tool: str,
        addresses: tuple[str, ...],
        outcome: str,
        elapsed: float,
        request_id: str,
    ) -> None:
        if grant is None:
            return
        record = AuditRecord(
            at=time.time(),
            workspace=grant.workspace,
            subject=grant.subject,
            tool=tool,
            addresses=addresses,
            outcome=outcome,
            duration_ms=round(elapsed * 1000, 3),
            request_id=request_id,
        )
        try:
            await self._audit.record(record)
        except Exception:
            # An audit failure must not turn a committed write into an error reply.
            log.warning("audit record for request %s was not written", request_id, exc_info=True)
