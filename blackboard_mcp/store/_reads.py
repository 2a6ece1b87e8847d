"""get_state and list_keys: batched reads under an honest token budget."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any, Literal

import redis.asyncio as aioredis

from . import _keys as keys
from ._addresses import Address, parse_address, validate_name
from ._budget import ENVELOPE_RESERVE, BudgetedRead, Candidate, check_budget
from ._errors import InvalidArgument
from ._links import decode_links, link_warnings
from ._notes import KINDS
from ._redis_errors import mapped_redis_errors
from ._tokencount import TokenCounter
from ._views import (
    FIELDS_BY_MODE,
    GET_MODES,
    LIST_MODES,
    Readable,
    build_candidate,
    check_fields,
    check_mode,
    iso_time,
    needs_body,
)

Order = Literal["recent", "name", "version"]
ORDERS: tuple[Order, ...] = ("recent", "name", "version")
MAX_URIS = 100
MAX_LIMIT = 200
# With a kind filter and name/version order, candidates come from this many of the most
# recent notes of that kind per topic.
KIND_WINDOW = 1000


def _text(value: bytes | None) -> str:
    return value.decode() if value is not None else ""


Fetched = list[tuple[dict[str, str] | None, set[bytes], set[bytes]]]


async def _fetch(
    client: aioredis.Redis[bytes],
    workspace: str,
    addresses: Sequence[Address],
    mode: str,
    with_body: bool,
) -> tuple[Fetched, int]:
    """One pipeline for the note fields and both link sets of every address, and the
    workspace's change sequence number (the read's cursor)."""
    fields = FIELDS_BY_MODE[mode]
    if not with_body:
        fields = [f for f in fields if f != "body"]
    pipe = client.pipeline(transaction=False)
    for address in addresses:
        pipe.hmget(keys.note(address.workspace, address.member), fields)
        pipe.smembers(keys.links_out(address.workspace, address.member))
        pipe.smembers(keys.links_in(address.workspace, address.member))
    pipe.get(keys.sequence(workspace))
    replies = await pipe.execute()
    cursor = int(replies.pop() or 0)
    out: Fetched = []
    for i in range(len(addresses)):
        values, outgoing, incoming = replies[3 * i : 3 * i + 3]
        if values[0] is None:
            out.append((None, set(), set()))
            continue
        out.append(({f: _text(v) for f, v in zip(fields, values, strict=True)}, outgoing, incoming))
    # Offloaded bodies: a second round trip, only for the notes that need it.
    blobs = [(i, n["blob"]) for i, (n, _, _) in enumerate(out) if n and n.get("blob")]
    if with_body and blobs:
        pipe = client.pipeline(transaction=False)
        for i, sha in blobs:
            pipe.get(keys.blob(addresses[i].workspace, sha))
        for (i, _), content in zip(blobs, await pipe.execute(), strict=True):
            note = out[i][0]
            assert note is not None
            note["body"] = _text(content)
    return out, cursor


def _filter_links(
    workspace: str, outgoing: set[bytes], incoming: set[bytes], readable: Readable
) -> list[dict[str, str]]:
    # A link into a topic the caller may not read would leak that note's name.
    links = decode_links(workspace, outgoing, incoming)
    prefix = len(f"bb://{workspace}/")
    return [
        link
        for link in links
        if readable((link.get("to") or link["from"])[prefix:].split("/", 1)[0])
    ]


def _budgeted(
    counter: TokenCounter,
    budget: int,
    addresses: Sequence[Address],
    fetched: Fetched,
    *,
    mode: Any,
    fields: Sequence[str],
    readable: Readable,
) -> BudgetedRead:
    read = BudgetedRead(budget=budget, counter=counter)
    for address, (note, outgoing, incoming) in zip(addresses, fetched, strict=True):
        if note is None:
            # Reported per uri, and under the budget like any other item.
            read.offer(
                Candidate(address.uri, {"uri": address.uri, "error": "not_found"}), ENVELOPE_RESERVE
            )
            continue
        links = _filter_links(address.workspace, outgoing, incoming, readable)
        read.warnings.extend(link_warnings(address.uri, links))
        candidate = build_candidate(
            note,
            mode=mode,
            fields=fields,
            body=note.get("body", ""),
            links=links,
            warnings=read.warnings,
            readable=readable,
        )
        read.offer(candidate, ENVELOPE_RESERVE)
    return read


async def get_state(
    client: aioredis.Redis[bytes],
    counter: TokenCounter,
    *,
    uris: object,
    mode: object = None,
    fields: object = None,
    budget_tokens: object = None,
    readable: Readable,
) -> dict[str, Any]:
    if isinstance(uris, str):
        uris = [uris]
    if not isinstance(uris, list | tuple) or not uris:
        raise InvalidArgument("uris must be a non-empty list of addresses", argument="uris")
    if len(uris) > MAX_URIS:
        raise InvalidArgument(f"at most {MAX_URIS} uris per call", argument="uris")
    addresses = list(dict.fromkeys(parse_address(u, argument="uris") for u in uris))
    workspaces = {a.workspace for a in addresses}
    if len(workspaces) > 1:
        raise InvalidArgument("all uris of one call must be in one workspace", argument="uris")
    checked_mode = check_mode(mode, GET_MODES)
    checked_fields = check_fields(fields)
    if checked_mode == "fields" and not checked_fields:
        raise InvalidArgument("mode=fields needs fields=[...]", argument="fields")
    budget = check_budget(budget_tokens)
    async with mapped_redis_errors():
        fetched, cursor = await _fetch(
            client,
            addresses[0].workspace,
            addresses,
            checked_mode,
            needs_body(checked_mode, checked_fields),
        )
    read = _budgeted(
        counter,
        budget,
        addresses,
        fetched,
        mode=checked_mode,
        fields=checked_fields,
        readable=readable,
    )
    return read.response(cursor)


async def list_keys(
    client: aioredis.Redis[bytes],
    counter: TokenCounter,
    *,
    workspace: str,
    topic: object = None,
    kind: object = None,
    order: object = None,
    limit: object = None,
    mode: object = None,
    fields: object = None,
    budget_tokens: object = None,
    cursor: object = None,
    readable: Readable,
) -> dict[str, Any]:
    checked_mode = check_mode(mode, LIST_MODES)
    checked_fields = check_fields(fields)
    budget = check_budget(budget_tokens)
    checked_order = _check_order(order)
    checked_limit = _check_limit(limit)
    since = _check_cursor(cursor)
    if kind is not None and kind not in KINDS:
        raise InvalidArgument(f"kind must be one of {', '.join(KINDS)}", argument="kind")
    warnings: list[str] = []
    async with mapped_redis_errors():
        if topic is not None:
            # The gateway has checked the caller's scopes already; filter anyway, so the
            # store never lists a topic its ``readable`` predicate refuses.
            topics = [t for t in [validate_name(topic, "topic")] if readable(t)]
        else:
            known = sorted(t.decode() for t in await client.smembers(keys.topics(workspace)))
            topics = [t for t in known if readable(t)]
            warnings.append(
                f"no topic given: listed every topic you may read ({len(topics)}); "
                "pass topic= to narrow it"
            )
        members, more = await _select(
            client,
            workspace,
            topics,
            kind=kind,
            order=checked_order,
            limit=checked_limit,
            since=since,
        )
        addresses = [Address(workspace, t, p) for t, p, _ in members]
        fetched, now = await _fetch(
            client, workspace, addresses, "full" if checked_mode == "table" else checked_mode, False
        )
    if checked_mode == "table":
        response = _table_response(
            counter, budget, addresses, fetched, checked_fields, readable, workspace
        )
    else:
        read = _budgeted(
            counter,
            budget,
            addresses,
            fetched,
            mode=checked_mode,
            fields=checked_fields,
            readable=readable,
        )
        read.warnings[:0] = warnings
        response = read.response(now)
    if warnings and checked_mode == "table":
        response.setdefault("warnings", [])[:0] = warnings
    if more:
        response["more"] = True
    # Paging a change feed: the next call passes this cursor to continue after what it saw.
    # Rows the budget left out must come back on the next page too, so the cursor stops at
    # the last row shown whether more rows remain past the limit or only past the budget.
    if since is not None and members and (more or response["omitted"]):
        shown = len(members) - response["omitted"]
        last_seq = members[shown - 1][2] if shown else since
        response["cursor"] = int(last_seq)
    else:
        response["cursor"] = now
    return response


def _check_order(value: object) -> Order:
    if value is None:
        return "recent"
    if value not in ORDERS:
        raise InvalidArgument(f"order must be one of {', '.join(ORDERS)}", argument="order")
    return value


def _check_limit(value: object) -> int:
    if value is None:
        return 20
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidArgument(
            f"limit must be a whole number from 1 to {MAX_LIMIT}", argument="limit"
        )
    return value


def _check_cursor(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument("cursor must be a cursor from an earlier read", argument="cursor")
    return value


async def _select(
    client: aioredis.Redis[bytes],
    workspace: str,
    topics: list[str],
    *,
    kind: object,
    order: Order,
    limit: int,
    since: int | None,
) -> tuple[list[tuple[str, str, float]], bool]:
    """Pick (topic, path, score) rows from the per-topic indexes; never scans the keyspace."""
    if not topics:
        return [], False
    pipe = client.pipeline(transaction=False)
    for topic in topics:
        recent_key = (
            keys.by_kind(workspace, topic, str(kind)) if kind else keys.by_recent(workspace, topic)
        )
        if since is not None:
            pipe.zrangebyscore(
                recent_key, f"({since}", "+inf", start=0, num=limit + 1, withscores=True
            )
        elif kind and order != "recent":
            pipe.zrevrange(recent_key, 0, KIND_WINDOW - 1, withscores=True)
        elif order == "recent":
            pipe.zrevrange(recent_key, 0, limit, withscores=True)
        elif order == "name":
            pipe.zrange(keys.by_name(workspace, topic), 0, limit, withscores=True)
        else:
            pipe.zrevrange(keys.by_version(workspace, topic), 0, limit, withscores=True)
    replies = await pipe.execute()
    rows = [
        (topic, member.decode(), float(score))
        for topic, reply in zip(topics, replies, strict=True)
        for member, score in reply
    ]
    if since is not None:
        rows.sort(key=lambda r: r[2])
    elif order == "recent":
        rows.sort(key=lambda r: -r[2])
    elif order == "name":
        rows.sort(key=lambda r: (r[0], r[1]))
    elif kind:
        versions = await _versions(client, workspace, rows)
        rows = [
            r
            for _, r in heapq.nsmallest(
                limit + 1,
                zip(versions, rows, strict=True),
                key=lambda vr: (-vr[0], vr[1][0], vr[1][1]),
            )
        ]
    else:
        rows.sort(key=lambda r: (-r[2], r[0], r[1]))
    return rows[:limit], len(rows) > limit


async def _versions(
    client: aioredis.Redis[bytes], workspace: str, rows: list[tuple[str, str, float]]
) -> list[int]:
    pipe = client.pipeline(transaction=False)
    for topic, path, _ in rows:
        pipe.hget(keys.note(workspace, f"{topic}/{path}"), "version")
    return [int(v or 0) for v in await pipe.execute()]


def _escape_cell(value: str) -> str:
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


TABLE_COLUMNS = ("uri", "digest", "version", "est_tokens")


def _table_response(
    counter: TokenCounter,
    budget: int,
    addresses: list[Address],
    fetched: Fetched,
    fields: Sequence[str],
    readable: Readable,
    workspace: str,
) -> dict[str, Any]:
    """One header line plus a TSV row per note: the cheapest listing for three or more."""
    extra = [f for f in fields if f in ("kind", "author", "updated", "size", "seq")]
    header = "\t".join([*TABLE_COLUMNS, *extra])
    lines = [header]
    spent = counter.count(header) + 1
    omitted: list[str] = []
    warnings: list[str] = []
    for address, (note, outgoing, incoming) in zip(addresses, fetched, strict=True):
        if note is None:
            continue
        links = _filter_links(workspace, outgoing, incoming, readable)
        warnings.extend(link_warnings(address.uri, links))
        cells = [note["uri"], note["digest"], note["version"], note["est_tokens"]]
        cells.extend(_extra_cell(note, f) for f in extra)
        line = "\t".join(_escape_cell(c) for c in cells)
        cost = counter.count(line) + 1
        if omitted or spent + cost > budget - ENVELOPE_RESERVE:
            omitted.append(address.uri)
            continue
        lines.append(line)
        spent += cost
    read = BudgetedRead(
        budget=budget,
        counter=counter,
        omitted_uris=omitted,
        warnings=warnings,
        # The table travels outside the items, so the envelope count below includes it.
        spent=0,
    )
    return read.response(0, {"table": "\n".join(lines)})


def _extra_cell(note: dict[str, str], name: str) -> str:
    if name == "updated":
        return iso_time(note.get("updated", ""))
    return note.get(name, "")
