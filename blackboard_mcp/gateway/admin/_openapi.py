"""The admin HTTP API described for machines: an OpenAPI 3.1 document at ``/admin/openapi.json``.

Its request bodies are the JSON schemas of the pydantic models that validate them
(_bodies.py, _lifecycle.py), so the description cannot drift from what is
accepted. What a model checks beyond its fields' types (exactly one target of a revoke or a
delete) is added here as ``oneOf``, in the same terms; tests/test_admin_openapi.py fuzzes the
live API against this document.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from blackboard_mcp import __version__
from blackboard_mcp.auth import SUBJECT_PATTERN

from ._bodies import IssueBody, RevokeBody
from ._lifecycle import DeleteBody, RetentionBody

PATH = "/admin/openapi.json"

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "hint"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "hint": {"type": "string"},
            },
        }
    },
}
_REFUSALS = {
    "400": "the body or query is not what the schema says",
    "401": "no bearer token, or one that cannot be trusted",
    "403": "the token is not an admin's, or asks for more than it holds",
    "413": "the body is over 16 KiB",
    "429": "the token made too many calls this minute",
    "503": "the board's Redis cannot be reached",
}


def _exactly_one(fields: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """``oneOf`` branches: each names one field as given (not null), as the model checks."""
    return [{"required": [name], "properties": {name: schema}} for name, schema in fields.items()]


def _body(model: type[BaseModel], one_of: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    schema = model.model_json_schema()
    if one_of:
        schema["oneOf"] = one_of
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _operation(
    summary: str,
    body: dict[str, Any] | None,
    *,
    parameters: list[dict[str, Any]] | None = None,
    refusals: dict[str, str] | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "security": [{"bearer": []}],
        "responses": {
            "200": {
                "description": "done",
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            **{
                status: {
                    "description": why,
                    "content": {"application/json": {"schema": _ERROR}},
                }
                for status, why in {**_REFUSALS, **(refusals or {})}.items()
            },
        },
    }
    if body is not None:
        operation["requestBody"] = body
    if parameters:
        operation["parameters"] = parameters
    return operation


def admin_openapi(*, max_ttl_seconds: int | None = None) -> dict[str, Any]:
    """The document, built from the models each endpoint validates its body with, and the
    board's own longest token lifetime (BB_MAX_TOKEN_TTL) as the ttl's maximum."""
    text = {"type": "string", "minLength": 1}
    issue = _body(IssueBody)
    if max_ttl_seconds is not None:
        schema = issue["content"]["application/json"]["schema"]
        schema["properties"]["ttl_seconds"]["maximum"] = max_ttl_seconds
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "blackboard-mcp admin API",
            "version": __version__,
            "description": "Tokens, revocation, deletion and retention, for an admin token "
            "of one workspace; every action stays inside that workspace and is audited.",
        },
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            "/admin/tokens": {
                "post": _operation("Issue a token within what the admin's own token holds", issue),
                "get": _operation(
                    "The tokens the board issued in the workspace (not those of an external "
                    "identity provider): id, sub, status (active, revoked, expired), expires, "
                    "last_used, parent, topics, capabilities and secret handle names",
                    None,
                    parameters=[
                        {
                            "name": "sub",
                            "in": "query",
                            "required": False,
                            "description": "only this subject's tokens",
                            "schema": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": 128,
                                "pattern": f"^{SUBJECT_PATTERN}$",
                            },
                        }
                    ],
                ),
            },
            "/admin/revoke": {
                "post": _operation(
                    "Revoke a token, a token id or every token of a subject (and every token "
                    "delegated from them)",
                    _body(RevokeBody, _exactly_one({"token": text, "id": text, "sub": text})),
                    refusals={
                        "404": "the board issued no token of that id or subject in this "
                        "workspace (force: true revokes it anyway), or the presented token is "
                        "not one this board signed",
                        "409": "the presented token has expired already: nothing to revoke",
                    },
                )
            },
            "/admin/delete": {
                "post": _operation(
                    "Delete a note, a topic or every note of the workspace (or preview it)",
                    _body(
                        DeleteBody,
                        _exactly_one({"uri": text, "topic": text, "everything": {"const": True}}),
                    ),
                )
            },
            "/admin/retention": {
                "get": _operation("The workspace's retention settings", None),
                "post": _operation(
                    "Set or clear the workspace's or a topic's maximum age", _body(RetentionBody)
                ),
            },
        },
    }


def openapi_routes(*, max_ttl_seconds: int | None = None) -> list[Route]:
    document = admin_openapi(max_ttl_seconds=max_ttl_seconds)

    async def serve(_request: Request) -> Response:
        return JSONResponse(document)

    return [Route(PATH, serve, methods=["GET"])]
