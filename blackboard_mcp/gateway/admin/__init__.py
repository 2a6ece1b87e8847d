"""The admin HTTP API: issuing, listing and revoking tokens, token exchange (RFC 8693),
deletes and retention, and the API's OpenAPI document."""

from ._audit import audit_admin_action
from ._token_exchange import token_exchange_routes
from ._tokens import admin_routes

__all__ = ["admin_routes", "audit_admin_action", "token_exchange_routes"]
