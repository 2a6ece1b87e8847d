"""A subscriptions/listen request as raw HTTP/1.1 bytes, for a client that reads the stream
itself (or stops reading it): the slow-listener test and the notify-latency benchmark."""

from __future__ import annotations

import json

# The protocol revision that has subscriptions/listen.
LISTEN_VERSION = "2026-07-28"


def listen_request(host: str, path: str, token: str, uris: list[str], *, client: str) -> bytes:
    """POST ``path`` on ``host`` (host:port) listening to ``uris``; ``client`` names the
    caller in its clientInfo and the request id."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": client,
            "method": "subscriptions/listen",
            "params": {
                "notifications": {"resourceSubscriptions": uris},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": LISTEN_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": client, "version": "0"},
                },
            },
        }
    ).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {LISTEN_VERSION}\r\n"
        f"Mcp-Method: subscriptions/listen\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body
