"""The admin HTTP API: issuing and revoking tokens, the token inventory, token exchange
(RFC 8693), deletes and retention, and the API's OpenAPI document."""

from ._audit import audit_admin_action
from ._token_exchange import token_exchange_routes
from ._token_inventory import RecordedTokens
from ._tokens import admin_routes

__all__ = ["RecordedTokens", "admin_routes", "audit_admin_action", "token_exchange_routes"]
