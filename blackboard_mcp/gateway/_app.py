"""The Starlette application: ``/mcp/`` behind the edge, plus health, readiness and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from blackboard_mcp.auth import (
    Authorizer,
    BatchAuditSink,
    RevocationList,
    Revoker,
    TokenInventory,
    TokenIssuer,
    TokenVerifier,
)
from blackboard_mcp.settings import Settings
from blackboard_mcp.store import Board, RedisCallAdmission, failure_reason

from ._audit_buffer import BufferedAudit
from ._calls import ToolCaller
from ._direct import DirectToolCalls
from ._edge import BearerAuth, BodyLimit, McpEndpointFirst, PostOnly, jsonrpc_refusal
from ._host_check import HostCheck, QuietDisconnects
from ._mcp import build_mcp_server
from ._metrics import GatewayMetrics
from ._not_found import NotFound
from ._oauth_metadata import ProtectedResource
from ._retention_sweeper import retention_sweeper
from ._tools import bound_manifest
from .admin import admin_routes, token_exchange_routes
from .listening import ChangeHub, DirectListen, Listens
from .page import board_routes

log = logging.getLogger(__name__)

_CLOSE = {"connection": "close"}
# How long the server waits for the board's start before it serves anyway.
START_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class GatewayParts:
    """Everything the app needs, built from the settings by blackboard_mcp/_composition.py."""

    settings: Settings
    board: Board
    verifier: TokenVerifier
    revocations: RevocationList
    audit: BatchAuditSink
    inventory: TokenInventory
    admission: RedisCallAdmission
    revoker: Revoker
    issuer: TokenIssuer | None = None
    # Where the workers of one `serve` count their metrics together (gateway/_metrics.py).
    metrics_dir: Path | None = None


def _transport_security(settings: Settings) -> TransportSecuritySettings:
    if settings.allowed_hosts:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=list(settings.allowed_hosts)
        )
    if settings.host in ("127.0.0.1", "localhost", "::1"):
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    # Behind a load balancer the Host header is the service's name. Every call needs a
    # bearer token, which a rebinding browser page does not have.
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


def _checked_hosts(security: TransportSecuritySettings) -> list[str] | None:
    """The Host values every route answers to: those the MCP transport checks, or None when
    it checks none (behind a load balancer, where every call needs a bearer token anyway)."""
    return list(security.allowed_hosts) if security.enable_dns_rebinding_protection else None


def protected_resource(
    settings: Settings, security: TransportSecuritySettings
) -> ProtectedResource:
    # Without BB_PUBLIC_URL, only a Host the rebinding check vouches for may name the board.
    hosts = security.allowed_hosts if security.enable_dns_rebinding_protection else []
    return ProtectedResource(
        public_url=settings.public_url,
        allowed_hosts=hosts,
        authorization_servers=settings.oauth_issuer,
        scopes_supported=settings.oauth_scopes_supported,
    )


def create_app(parts: GatewayParts) -> Starlette:
    settings = parts.settings
    manifest = bound_manifest()
    metrics = GatewayMetrics(multiprocess_dir=parts.metrics_dir)
    audit = BufferedAudit(sink=parts.audit, linger_seconds=settings.audit_linger_seconds)
    admission = parts.admission
    caller = ToolCaller(
        board=parts.board,
        manifest=manifest,
        authorizer=Authorizer(),
        admission=admission,
        audit=audit,
        metrics=metrics,
        max_in_flight=settings.max_in_flight,
    )
    hub = ChangeHub(
        parts.board,
        revocations=parts.revocations,
        per_token=settings.listeners_per_token,
        queue_size=settings.listener_queue,
        writes_per_second=settings.listener_writes_per_second,
        on_drop=metrics.listeners_dropped.inc,
    )
    listens = Listens(caller, hub)
    server = build_mcp_server(caller, listens)
    security = _transport_security(settings)
    resource = protected_resource(settings, security)
    sessions = StreamableHTTPSessionManager(
        app=server,
        json_response=True,
        stateless=True,
        security_settings=security,
        max_request_body_size=settings.max_request_bytes,
    )
    protocol_app: ASGIApp = sessions.handle_request
    if settings.direct_tool_calls:
        protocol_app = DirectToolCalls(
            protocol_app,
            caller=caller,
            server=server,
            security=security,
            metrics=metrics,
            listen=DirectListen(listens, server_info=server.server_info_stamp),
        )
    mcp_app = PostOnly(
        BodyLimit(
            BearerAuth(
                protocol_app, verifier=parts.verifier, resource=resource, shape=jsonrpc_refusal
            ),
            max_bytes=settings.max_request_bytes,
            shape=jsonrpc_refusal,
        )
    )

    # What anyone may ask without a token is answered on a connection that then closes: kept
    # alive, a few probing sockets could hold every slot of BB_MAX_CONNECTIONS.
    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"}, headers=_CLOSE)

    async def readyz(_request: Request) -> Response:
        if await parts.board.ready():
            return JSONResponse({"status": "ready"}, headers=_CLOSE)
        return JSONResponse({"status": "unavailable"}, status_code=503, headers=_CLOSE)

    async def metrics_endpoint(_request: Request) -> Response:
        metrics.observe_nodes(await parts.board.nodes())
        return Response(metrics.render(), media_type="text/plain; version=0.0.4", headers=_CLOSE)

    async def start_board() -> None:
        try:
            await parts.board.start()
        except Exception as exc:
            # Start anyway: /readyz reports the problem and calls answer `unavailable`
            # until Redis is back, which is better than a crash loop.
            log.warning(
                "could not prepare the board at start-up (Redis at %s): %s",
                parts.board.location,
                failure_reason(exc),
            )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        starting = asyncio.create_task(start_board())
        # The first start after an upgrade may rename every note's fields, which takes
        # about a minute a million notes: past this wait the server answers /healthz (so
        # that a liveness probe does not restart it half way) while the start goes on, and
        # note calls answer `unavailable` until it is done.
        await asyncio.wait({starting}, timeout=START_WAIT_SECONDS)
        if not starting.done():
            log.warning(
                "still preparing the board after %.0f s (renaming its note fields to this "
                "release's layout); serving, with note calls refused until it is done",
                START_WAIT_SECONDS,
            )
        try:
            async with (
                audit.running(),
                sessions.run(),
                retention_sweeper(
                    parts.board, parts.audit, interval=settings.retention_sweep_seconds
                ),
            ):
                yield
                await hub.close()
        finally:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        await parts.board.close()

    routes = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics_endpoint),
        # /mcp and /mcp/ are taken by McpEndpointFirst before routing; anything below them.
        Mount("/mcp", app=mcp_app),
        *resource.routes(),
        *board_routes(
            caller=caller,
            hub=hub,
            verifier=parts.verifier,
            audit=parts.audit,
            resource=resource,
        ),
        *admin_routes(
            verifier=parts.verifier,
            revocations=parts.revocations,
            revoker=parts.revoker,
            issuer=parts.issuer,
            inventory=parts.inventory,
            audit=parts.audit,
            resource=resource,
            board=parts.board,
        ),
        *token_exchange_routes(
            verifier=parts.verifier,
            admission=admission,
            issuer=parts.issuer,
            inventory=parts.inventory,
            audit=audit,
        ),
    ]
    not_found = NotFound(settings.oauth_issuer)
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(QuietDisconnects),
            Middleware(HostCheck, allowed=_checked_hosts(security)),
            Middleware(McpEndpointFirst, mcp_app=mcp_app),
        ],
        exception_handlers={404: not_found, 405: not_found},
    )
