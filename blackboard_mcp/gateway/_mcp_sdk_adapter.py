"""The adapter to the MCP SDK: the parts of it the direct tool-call path uses beyond its API.

gateway/_direct.py answers plain ``tools/call`` and ``subscriptions/listen`` POSTs itself,
and to answer them exactly as the SDK would it runs the SDK's own request checks: transport
security, the Accept check, the 2026-07-28 envelope ladder (``mcp.shared.inbound``, whose
table also gives a refusal its HTTP status) and the protocol's parameter rules per
version; and it tells the SDK's own tracing middleware, which every server carries, from
one that would change an answer. None of these is documented API, so any release may
change them. They are imported here and nowhere else, and the package pins the SDK to the
release this module was tested against (``TESTED``, the same as pyproject.toml's);
``tests/test_direct_calls.py`` holds the direct path to the SDK's answers request for
request, and ``tests/test_library_ranges.py`` fails with the range it needs.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import ServerMiddleware
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types import DEFAULT_NEGOTIATED_VERSION, SERVER_INFO_META_KEY
from mcp_types import methods as protocol_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

# Keep equal to pyproject.toml's mcp requirement (a test holds them together).
TESTED = "==2.3.0"


def installed_version() -> str:
    return version("mcp")


def is_sdk_tracing(middleware: ServerMiddleware[Any]) -> bool:
    """Whether a server middleware is the SDK's own tracing, which leaves answers as they are."""
    return isinstance(middleware, OpenTelemetryMiddleware)


__all__ = [
    "DEFAULT_NEGOTIATED_VERSION",
    "ERROR_CODE_HTTP_STATUS",
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "MODERN_PROTOCOL_VERSIONS",
    "SERVER_INFO_META_KEY",
    "TESTED",
    "InboundModernRoute",
    "TransportSecurityMiddleware",
    "check_accept_headers",
    "classify_inbound_request",
    "find_duplicated_routing_header",
    "installed_version",
    "is_sdk_tracing",
    "protocol_methods",
    "validate_mcp_param_headers",
]
