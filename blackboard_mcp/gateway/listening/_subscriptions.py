"""``subscriptions/listen``: a 2026-07-28 client's stream of ``notifications/resources/updated``
and, when it asks, ``notifications/resources/list_changed``.

A subscription names notes (``bb://ws/topic/key``) and topics (``bb://ws/topic``, any note in
it). The listen is admitted on what contracts/board.tb states for ``subscriptions/listen``
and on those addresses (a topic's address checked as a note of that topic would be): in the
token's workspace, topics the token may read, token not revoked, within its rate; a refusal
comes before the acknowledgement, with its error (code, message, hint) as the JSON-RPC
error's data. Its audit record is a ``subscriptions/listen`` of the addresses named.
Keep-alives are the transport's SSE comments, after every 15 s of silence.

A listen asking ``resourcesListChanged`` hears when what resources/list offers its token
changes: a topic it may read gains its first note or loses its last, or the catch-up note
comes or goes (_hub.py ``Listing``). It may name no resource at all.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    INVALID_REQUEST,
    NotificationParams,
    RequestId,
    ResourceListChangedNotification,
    ResourceUpdatedNotification,
    ResourceUpdatedNotificationParams,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)

from blackboard_mcp.auth import Grant, TokenRevoked
from blackboard_mcp.store import Board, InvalidArgument, parse_address, parse_topic_address

from .._calls import ToolCaller
from .._context import current_grant, current_request_id
from .._errors import tool_error
from .._resources import raise_refusal, rpc_error
from ._hub import IDLE, ChangeHub, Listener, ListenerDropped, Notice

# The audit records' name for a listen: the MCP method.
LISTEN = "subscriptions/listen"
# A listen follows at most this many addresses; a topic's address follows a whole topic.
MAX_SUBSCRIPTIONS = 100


def _follows(
    uris: list[str],
) -> tuple[frozenset[str], frozenset[str], list[str], list[str]]:
    """The notes and topics ``uris`` name, each as a note address to check access by, and
    each as its address (for the audit)."""
    if len(uris) > MAX_SUBSCRIPTIONS:
        raise InvalidArgument(
            f"at most {MAX_SUBSCRIPTIONS} resource subscriptions per listen; "
            "follow a whole topic with bb://<workspace>/<topic>",
            argument="resourceSubscriptions",
        )
    notes: set[str] = set()
    topics: set[str] = set()
    checked: list[str] = []
    followed: list[str] = []
    for uri in uris:
        topic = parse_topic_address(uri, argument="topic")
        if topic is None:
            address = parse_address(uri, argument="resourceSubscriptions").require_note(
                "resourceSubscriptions"
            )
            notes.add(address.uri)
            checked.append(address.uri)
            followed.append(address.uri)
        else:
            topics.add(topic[1])
            checked.append(f"{uri}/_")
            followed.append(uri)
    return frozenset(notes), frozenset(topics), checked, followed


async def _admitted(_board: Board, _grant: Grant) -> dict[str, Any]:
    return {}


# At most this many changes already waiting go out together in one write.
BATCH = 256


@dataclass
class AdmittedListen:
    """A listen that passed its checks: its listener (already receiving changes), the
    subscriptions its acknowledgement lists, and how long its token still lives."""

    listener: Listener
    subscription_id: RequestId
    honored: list[str]
    expires_in: float
    # The tool list never changes: asked to hear of it, the board honours it (nothing comes).
    tools_list_changed: bool = False
    resources_list_changed: bool = False

    @property
    def meta(self) -> dict[str, Any]:
        return {SUBSCRIPTION_ID_META_KEY: self.subscription_id}

    def acknowledgement(self) -> SubscriptionsAcknowledgedNotification:
        # The subset honoured: resource subscriptions, the resource list's changes, and the
        # tool list's (there are none). Prompts there are none of.
        return SubscriptionsAcknowledgedNotification(
            params=SubscriptionsAcknowledgedNotificationParams(
                notifications=SubscriptionFilter(
                    resource_subscriptions=self.honored or None,
                    tools_list_changed=True if self.tools_list_changed else None,
                    resources_list_changed=True if self.resources_list_changed else None,
                ),
                _meta=self.meta,
            )
        )


class Listens:
    """The checks and the change loop of a listen, shared by the SDK's path (BoardListen)
    and the direct one (_stream.py), so both refuse, follow and end alike."""

    def __init__(self, caller: ToolCaller, hub: ChangeHub) -> None:
        self._caller = caller
        self._hub = hub

    @property
    def hub(self) -> ChangeHub:
        return self._hub

    async def admit(
        self,
        subscription_id: RequestId,
        uris: list[str],
        *,
        tools_list_changed: bool = False,
        resources_list_changed: bool = False,
    ) -> AdmittedListen:
        """Admit the listen and join its listener; an MCPError (with the tool error as its
        data) if refused."""
        grant = current_grant.get()
        request_id = current_request_id.get()
        try:
            notes, topics, checked, followed = _follows(uris)
        except InvalidArgument as exc:
            raise rpc_error(tool_error(exc, request_id)["error"]) from None
        # Once admitted, the listen's work is joining the hub, which answers for itself.
        outcome = await self._caller.serve(
            LISTEN, grant, request_id, _admitted, reads=checked, audited=followed
        )
        raise_refusal(outcome)
        assert grant is not None  # refused above otherwise
        try:
            listener = await self._hub.join(
                grant, notes=notes, topics=topics, lists=resources_list_changed
            )
        except Exception as exc:
            raise rpc_error(tool_error(exc, request_id)["error"]) from None
        # A stream outlives no token: at its expiry it ends, and the client listens again
        # with a fresh one.
        expires_in = max(0.0, grant.expires_at - time.time())
        return AdmittedListen(
            listener,
            subscription_id,
            uris,
            expires_in,
            tools_list_changed=tools_list_changed,
            resources_list_changed=resources_list_changed,
        )

    async def follow(
        self,
        listen: AdmittedListen,
        acknowledge: Callable[[], Awaitable[None]],
        deliver: Callable[[list[Notice]], Awaitable[None]],
        *,
        idle_seconds: float | None = None,
        on_idle: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Send the acknowledgement, then hand ``deliver`` the listener's changes (those
        already waiting together) until the token expires or the hub ends the stream; then
        raise the MCPError the stream ends with, if any (revoked token, listener dropped).
        ``on_idle`` runs after each ``idle_seconds`` without a change. Leaves the hub in
        every case."""
        listener = listen.listener
        request_id = current_request_id.get()
        wait = listen.expires_in + 1 if idle_seconds is None else idle_seconds
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + listen.expires_in) as scope:
                # A listener that fell behind is cut off here, even while this task is stuck
                # writing to a client that stopped reading.
                listener.on_drop = scope.cancel
                await acknowledge()
                ended = False
                while not ended:
                    notice = await self._hub.next_change(listener, wait_seconds=wait)
                    if notice is None:
                        break
                    if notice is IDLE:
                        if on_idle is not None:
                            await on_idle()
                        continue
                    # What the pump's last read brought, in one write (the pump paces reads).
                    more, ended = self._hub.waiting(listener, limit=BATCH - 1)
                    batch = [notice, *more]
                    await deliver(batch)
                    listener.handed(batch)
        except TokenRevoked as exc:
            raise rpc_error(tool_error(exc, request_id)["error"]) from None
        finally:
            self._hub.leave(listener)
        if listener.dropped:
            dropped = ListenerDropped(
                f"listener dropped: more than {listener.limit} changes were waiting",
                cursor=listener.resume_after,
            )
            raise rpc_error(tool_error(dropped, request_id)["error"])


class BoardListen:
    """The handler the MCP server registers for subscriptions/listen."""

    def __init__(self, listens: Listens) -> None:
        self._listens = listens

    async def __call__(
        self, ctx: Any, params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen requires a request id")
        wanted = params.notifications
        uris = list(wanted.resource_subscriptions or ())
        listen = await self._listens.admit(
            subscription_id,
            uris,
            tools_list_changed=bool(wanted.tools_list_changed),
            resources_list_changed=bool(wanted.resources_list_changed),
        )
        meta = listen.meta

        async def deliver(notices: list[Notice]) -> None:
            for notice in notices:
                await ctx.session.send_notification(
                    ResourceListChangedNotification(params=NotificationParams(_meta=meta))
                    if notice.list_changed
                    else ResourceUpdatedNotification(
                        params=ResourceUpdatedNotificationParams(uri=notice.change.uri, _meta=meta)
                    ),
                    related_request_id=subscription_id,
                )

        async def acknowledge() -> None:
            await ctx.session.send_notification(
                listen.acknowledgement(), related_request_id=subscription_id
            )

        await self._listens.follow(listen, acknowledge, deliver)
        return SubscriptionsListenResult(_meta=meta)
