"""One call from grant to result: admit it, run it, audit and measure it.

Admission is one step, whatever the call: the token (verified at the edge), the workspace
and topics of what the call names, the requirements contracts/board.tb states for it,
revocation and the rate limit. A tool call and an endpoint (a resource, a listen, the board
page's API) each run on their own once admitted, and each is audited under its own name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import orjson

from blackboard_mcp.auth import (
    AuditRecord,
    AuditSink,
    Authorizer,
    Grant,
    Manifest,
    Requirements,
    TokenRevoked,
    Unauthenticated,
)
from blackboard_mcp.store import Admission, Board, Gate, GetState, RedisCallAdmission

from ._errors import RateLimited, TooManyInFlight, UnknownArgument, UnknownTool, tool_error
from ._metrics import GatewayMetrics
from ._schemas import ARGUMENTS
from ._tools import AnyToolSpec, CallScope, scope_of

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


class Admitter:
    """The one admission step of every call: a refusal here comes before anything runs."""

    def __init__(self, *, authorizer: Authorizer, admission: RedisCallAdmission) -> None:
        self._authorizer = authorizer
        self._admission = admission

    async def admit(
        self,
        grant: Grant,
        requirements: Requirements,
        scope: CallScope,
        *,
        arguments_present: AbstractSet[str] = frozenset(),
        deferred: bool = False,
    ) -> Gate | None:
        """Refuse the call unless ``grant`` may make it. ``deferred``: revocation and the rate
        limit are not asked here but returned as the gate the call's first round trip to
        Redis carries (a write's, or get_state's), judged there before anything is written
        or anything read is used; otherwise they are asked in a round trip of their own."""
        admission = None if deferred else await self._admission.admit(grant)
        if admission is not None:
            _refuse_if_revoked(admission)
        self._authorizer.authorize(
            grant,
            requirements,
            arguments_present=arguments_present,
            workspace=scope.workspace,
            read_topics=scope.read_topics,
            write_topics=scope.write_topics,
            corrected=scope.corrected,
            reads_catch_up_only=scope.reads_catch_up_only,
        )
        if admission is not None:
            _refuse_if_limited(admission, grant)
            return None
        return self._admission.gate(grant, lambda verdict: _refuse_unless_admitted(verdict, grant))


@dataclass
class _Attempt:
    """What one call got to: the addresses its audit record names, whether it ran, and
    whether its answer refuses some of what it asked."""

    addresses: tuple[str, ...] = ()
    ran: bool = False
    partly_refused: bool = False


Work = Callable[[Grant, _Attempt], Awaitable[Mapping[str, Any]]]
Run = Callable[[Board, Grant], Awaitable[Mapping[str, Any]]]


class ToolCaller:
    """Runs the five tools' calls and the endpoints' for the MCP server and the board page.

    Every refusal happens before the call runs, except the admission of a gated tool
    (revocation, rate limit): its handler sends it in its first round trip to Redis, and it
    is judged there before anything is written or anything read is used.
    """

    def __init__(
        self,
        *,
        board: Board,
        manifest: Manifest[AnyToolSpec],
        authorizer: Authorizer,
        admission: RedisCallAdmission,
        audit: AuditSink,
        metrics: GatewayMetrics,
        max_in_flight: int = 1024,
    ) -> None:
        self._board = board
        self._manifest = manifest
        self._admitter = Admitter(authorizer=authorizer, admission=admission)
        self._audit = audit
        self._metrics = metrics
        self._max_in_flight = max_in_flight
        self._in_flight = 0

    async def call(
        self, tool: str, arguments: Mapping[str, Any], grant: Grant | None, request_id: str
    ) -> CallOutcome:
        """Run one of the five tools, audited under its name."""
        spec = self._manifest.bound(tool)

        async def work(grant: Grant, attempt: _Attempt) -> Mapping[str, Any]:
            if spec is None:
                raise UnknownTool(f"there is no tool {tool!r}")
            if not ARGUMENTS[tool].issuperset(arguments):
                unknown = sorted(set(arguments) - ARGUMENTS[tool])
                raise UnknownArgument(
                    f"{tool} does not take {', '.join(unknown)}", argument=unknown[0]
                )
            # Present means given with a value: a null is the same as leaving it out.
            args = {k: v for k, v in arguments.items() if v is not None}
            call = spec.parse(args)
            scope = scope_of(call.request, grant, per_item=True)
            attempt.addresses = scope.addresses
            gate = await self._admitter.admit(
                grant,
                spec.requirements,
                scope,
                arguments_present=args.keys(),
                deferred=spec.gated,
            )
            attempt.ran = True
            result = await call.run(self._board, grant, gate)
            # Answered, but the call asked for what the token may not read: the audit and
            # the metrics count it as a refusal.
            attempt.partly_refused = bool(scope.refused)
            return result

        # The client names the tool: a name that is none of ours would add a series to
        # /metrics per name sent, so every such call counts under one.
        series = tool if spec is not None else UNKNOWN_TOOL_SERIES
        return await self._attempt(tool, series, grant, request_id, work)

    async def serve(
        self,
        endpoint: str,
        grant: Grant | None,
        request_id: str,
        run: Run,
        *,
        reads: Sequence[str] = (),
        audited: Sequence[str] | None = None,
    ) -> CallOutcome:
        """Run ``endpoint`` (declared in contracts/board.tb) once admitted on what the contract
        states for it, audited under its name with ``audited`` (else ``reads``).

        ``reads``: the notes it reads, whose topics the token must read (a topic read whole
        is named by a note address in it); the catch-up note needs none."""
        requirements = self._manifest.endpoint(endpoint)

        async def work(grant: Grant, attempt: _Attempt) -> Mapping[str, Any]:
            attempt.addresses = tuple(reads if audited is None else audited)
            scope = (
                scope_of(GetState.parse({"uris": list(reads)}), grant)
                if reads
                else CallScope(grant.workspace)
            )
            await self._admitter.admit(grant, requirements, scope)
            attempt.ran = True
            return await run(self._board, grant)

        return await self._attempt(endpoint, endpoint, grant, request_id, work)

    async def _attempt(
        self, name: str, series: str, grant: Grant | None, request_id: str, work: Work
    ) -> CallOutcome:
        """``work`` within this process's bound of calls in hand; measured, logged, audited."""
        started = time.perf_counter()
        attempt = _Attempt()
        outcome = "ok"
        counted = False
        try:
            # Counted here, on the one path every call takes. Past the limit a call is
            # refused at once: queued, it would wait behind the others for a Redis
            # connection and be answered late or not at all.
            if self._in_flight >= self._max_in_flight:
                raise TooManyInFlight(
                    f"this gateway process has {self._max_in_flight} calls in hand",
                    retry_after=OVERLOADED_RETRY_AFTER_SECONDS,
                )
            self._in_flight += 1
            counted = True
            if grant is None:
                raise Unauthenticated("no access token")
            result = await work(grant, attempt)
            if attempt.partly_refused:
                outcome = "forbidden"
                self._metrics.refused.labels(outcome).inc()
            return CallOutcome(result, False)
        except Exception as exc:
            body = tool_error(exc, request_id)
            outcome = body["error"]["code"]
            if outcome == "conflict":
                self._metrics.conflicts.inc()
            if not attempt.ran or isinstance(exc, _ADMISSION_REFUSALS):
                self._metrics.refused.labels(outcome).inc()
            return CallOutcome(body, True)
        finally:
            if counted:
                self._in_flight -= 1
            elapsed = time.perf_counter() - started
            self._metrics.calls.labels(series, outcome).inc()
            self._metrics.latency.labels(series).observe(elapsed)
            # Refusals and errors at INFO, the rest at DEBUG: the audit stream has every call,
            # and a log line per successful call is a cost paid on the hot path.
            level = logging.DEBUG if outcome == "ok" else logging.INFO
            if log.isEnabledFor(level):
                log.log(
                    level,
                    "tool call %s %s",
                    name,
                    outcome,
                    extra={
                        "request_id": request_id,
                        "sub": grant.subject if grant else None,
                        "ws": grant.workspace if grant else None,
                        "tool": name,
                        "outcome": outcome,
                        "ms": round(elapsed * 1000, 3),
                    },
                )
            await self._record(grant, name, attempt.addresses, outcome, elapsed, request_id)

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
