"""Notes as MCP resources: ``bb://{workspace}/{topic}/{+key}``, read in full.

Each is an endpoint of contracts/board.tb, admitted by the ToolCaller on what the contract
states for it (the token's workspace, the topics of what it names, its capabilities,
revocation, rate limit) and audited under its own name: ``resources/read`` with the address
read, ``resources/list``. A refusal's code, message and hint are the JSON-RPC error's data.
resources/list offers the catch-up note and the topics the token may read, from the topic
set (never a scan of the notes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextResourceContents,
)

from blackboard_mcp.auth import Grant, WrongWorkspace
from blackboard_mcp.store import (
    CATCH_UP_PATH,
    Board,
    GetState,
    InvalidArgument,
    ListKeys,
    catch_up_address,
    parse_address,
    parse_topic_address,
)

from ._calls import CallOutcome, ToolCaller
from ._context import current_grant, current_request_id
from ._errors import tool_error

# Their names in contracts/board.tb and in the audit: the MCP methods.
LIST = "resources/list"
READ = "resources/read"
NOTE_TEMPLATE = "bb://{workspace}/{topic}/{+key}"
# The code for an unknown resource before 2026-07-28; from that version on it is invalid
# params. Other refusals are bad parameters or our fault.
RESOURCE_NOT_FOUND = -32002
NOT_FOUND_AS_INVALID_PARAMS = "2026-07-28"
_SERVER_SIDE = frozenset({"internal", "unavailable", "overloaded"})
_MIME = {"table": "text/tab-separated-values"}


def rpc_error(
    error: Mapping[str, Any], *, protocol_version: str = "", uri: str | None = None
) -> MCPError:
    """A JSON-RPC error carrying a tool error's body (code, message, hint) as its data, and
    the resource's ``uri`` when it names one."""
    code = error["code"]
    if code == "not_found":
        modern = protocol_version >= NOT_FOUND_AS_INVALID_PARAMS
        rpc = INVALID_PARAMS if modern else RESOURCE_NOT_FOUND
    else:
        rpc = INTERNAL_ERROR if code in _SERVER_SIDE else INVALID_PARAMS
    data = dict(error)
    if uri is not None:
        data.setdefault("uri", uri)
    return MCPError(rpc, error["message"], data=data)


def raise_refusal(
    outcome: CallOutcome, *, protocol_version: str = "", uri: str | None = None
) -> None:
    if outcome.is_error:
        raise rpc_error(outcome.body["error"], protocol_version=protocol_version, uri=uri)


class BoardResources:
    """The handlers the MCP server registers for resources/list, /templates/list and /read."""

    def __init__(self, caller: ToolCaller) -> None:
        self._caller = caller

    async def list_templates(self, _ctx: Any, _params: Any) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(
            resource_templates=[
                ResourceTemplate(
                    name="note",
                    uri_template=NOTE_TEMPLATE,
                    description="A note's whole content; a table as TSV.",
                )
            ]
        )

    async def list_resources(self, _ctx: Any, _params: Any) -> ListResourcesResult:
        grant = current_grant.get()

        async def topics(board: Board, grant: Grant) -> dict[str, Any]:
            found = await board.topics(workspace=grant.workspace, readable=grant.can_read)
            # Offered only once it exists: a listed resource must be one a read can read.
            catch_up = await board.get_state(
                GetState.parse({"uris": [catch_up_address(grant.workspace).uri], "mode": "ref"})
            )
            return {"topics": found, "catch_up": "error" not in catch_up["items"][0]}

        outcome = await self._caller.serve(LIST, grant, current_request_id.get(), topics)
        raise_refusal(outcome)
        assert grant is not None  # a call without a grant is refused above
        ws = grant.workspace
        # Every reader of the workspace may read its catch-up note, whatever its topics.
        resources = (
            [
                Resource(
                    name="catch-up",
                    uri=f"bb://{ws}/{CATCH_UP_PATH}",
                    description="Read this first.",
                )
            ]
            if outcome.body["catch_up"]
            else []
        )
        for topic, count in outcome.body["topics"]:
            resources.append(
                Resource(
                    name=topic,
                    uri=f"bb://{ws}/{topic}",
                    description=f"{count} note{'' if count == 1 else 's'}; "
                    "subscribe for changes to any of them",
                    mime_type="application/json",
                )
            )
        return ListResourcesResult(resources=resources)

    async def read_resource(
        self, ctx: Any, params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = params.uri
        grant = current_grant.get()
        request_id = current_request_id.get()
        version = str(getattr(ctx, "protocol_version", "") or "")
        try:
            topic = parse_topic_address(uri, argument="topic")
        except InvalidArgument as exc:
            raise rpc_error(tool_error(exc, request_id)["error"]) from None
        if topic is not None:
            # A topic's address reads as its listing (names and digests, newest first), of
            # the token's own workspace only: list_keys takes no workspace, so it is checked
            # here, as every address of a tool call is.
            workspace, name = topic
            if grant is not None and workspace != grant.workspace:
                refused = WrongWorkspace(
                    f"the token is for workspace {grant.workspace!r}, not {workspace!r}",
                    hint=f"use bb://{grant.workspace}/{name}",
                )
                raise rpc_error(tool_error(refused, request_id)["error"])

            async def listing(board: Board, grant: Grant) -> Mapping[str, Any]:
                request = ListKeys.parse({"topic": name})
                return await board.list_keys(
                    request, workspace=grant.workspace, readable=grant.can_read
                )

            # Its topic is checked as any note of it would be.
            outcome = await self._caller.serve(
                READ,
                grant,
                request_id,
                listing,
                reads=[f"bb://{workspace}/{name}/_"],
                audited=[uri],
            )
            raise_refusal(outcome, protocol_version=version, uri=uri)
            return ReadResourceResult(
                contents=[
                    TextResourceContents(
                        uri=uri,
                        mime_type="application/json",
                        text=orjson.dumps(dict(outcome.body)).decode(),
                    )
                ]
            )

        async def whole(board: Board, _grant: Grant) -> dict[str, Any]:
            note = await board.read_note(parse_address(uri))
            return {"kind": note.kind, "text": note.text, "version": note.version}

        outcome = await self._caller.serve(READ, grant, request_id, whole, reads=[uri])
        raise_refusal(outcome, protocol_version=version, uri=uri)
        body = outcome.body
        return ReadResourceResult(
            contents=[
                TextResourceContents(
                    uri=parse_address(uri).uri,
                    mime_type=_MIME.get(body["kind"], "text/plain"),
                    text=body["text"],
                    _meta={"version": body["version"], "kind": body["kind"]},
                )
            ]
        )
