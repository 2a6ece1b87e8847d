"""What a note was made from, whether that has moved on, and links that can be withdrawn.

Through the gateway in process on the real Redis: a link and a write's sources record the
versions of both ends; reads say when what a note was derived from has been written since,
and when a contradiction or supersession was about an older version of the note; a link can
be removed by any token that could have made it, and its warning stops at once; sources must
exist, as a link's ends must.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import redis.asyncio as aioredis
from app_support import InProcessGateway, in_process_gateway
from store_support import RoundTrips
from support import admin_token, agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import (
    Board,
    GetState,
    InvalidArgument,
    LinkState,
    UpdateState,
    check_record,
    every_topic,
)
from blackboard_mcp.store.connection._field_names import FIELD


@pytest.fixture
async def gateway(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    async with in_process_gateway(redis_url, tmp_path, rate_limit_per_minute=1_000_000) as gw:
        yield gw


async def write(gateway: InProcessGateway, token: str, uri: str, text: str, **extra: object) -> int:
    answer = await gateway.ok(token, "update_state", uri=uri, digest=text, body=text, **extra)
    version: int = answer["version"]
    return version


def warnings_of(answer: dict[str, object]) -> list[str]:
    found = answer.get("warnings")
    assert found is None or isinstance(found, list)
    return list(found or [])


async def test_a_derived_note_says_its_source_has_moved_on_once_per_source(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    plan = f"bb://{workspace}/plan/q3"
    finding = f"bb://{workspace}/research/finding"
    await write(gateway, token, plan, "plan v1")
    # Both a link and the write's sources name the plan: one warning, not two.
    await write(gateway, token, finding, "cache helps", sources=[plan])
    await gateway.ok(token, "link_state", src=finding, rel="derived_from", dst=[plan])
    fresh = await gateway.ok(token, "get_state", uris=[finding])
    assert warnings_of(fresh) == []

    await write(gateway, token, plan, "plan v2", expect_version=1)
    await write(gateway, token, plan, "plan v3", expect_version=2)
    stale = f"{finding} is derived from {plan} v1; it is at v3"
    for mode in ("digest", "full", "ref"):
        answer = await gateway.ok(token, "get_state", uris=[finding], mode=mode)
        assert warnings_of(answer) == [stale], mode
    # A reviewer lists the topic and sees which notes are stale.
    listed = await gateway.ok(token, "list_keys", topic="research")
    assert warnings_of(listed) == [stale]
    table = await gateway.ok(token, "list_keys", topic="research", mode="table")
    assert warnings_of(table) == [stale]
    found = await gateway.ok(token, "search_keys", q="cache helps")
    assert [i["uri"] for i in found["items"]] == [finding] and warnings_of(found) == [stale]

    # Linking again says the derivation holds as the plan is now: the warning goes.
    await gateway.ok(token, "link_state", src=finding, rel="derived_from", dst=[plan])
    answer = await gateway.ok(token, "get_state", uris=[finding])
    assert warnings_of(answer) == [f"{finding} was written from {plan} v1; it is at v3"]
    await write(gateway, token, finding, "cache helps, checked", expect_version=1, sources=[plan])
    assert warnings_of(await gateway.ok(token, "get_state", uris=[finding])) == []


async def test_a_contradiction_of_an_older_version_reads_as_possibly_settled(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    plan = f"bb://{workspace}/plan/q3"
    doubt = f"bb://{workspace}/research/cache-hypothesis"
    await write(gateway, token, plan, "plan v1")
    await write(gateway, token, doubt, "the cache will not help")
    await gateway.ok(token, "link_state", src=doubt, rel="contradicts", dst=[plan])
    answer = await gateway.ok(token, "get_state", uris=[plan])
    assert warnings_of(answer) == [f"{plan} is contradicted by {doubt}"]

    await write(gateway, token, plan, "plan v2 settles it", expect_version=1)
    answer = await gateway.ok(token, "get_state", uris=[plan])
    assert warnings_of(answer) == [f"{plan} was contradicted by {doubt} at v1; this note is at v2"]
    answer = await gateway.ok(token, "get_state", uris=[doubt])
    assert warnings_of(answer) == [f"{doubt} contradicts {plan} as it was at v1; it is at v2"]
    # Both ends in one answer: each says its own side once.
    both = await gateway.ok(token, "get_state", uris=[plan, doubt])
    assert warnings_of(both) == [
        f"{plan} was contradicted by {doubt} at v1; this note is at v2",
        f"{doubt} contradicts {plan} as it was at v1; it is at v2",
    ]


async def test_a_supersession_of_an_older_version_names_that_version(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    old, new = f"bb://{workspace}/plan/a", f"bb://{workspace}/plan/b"
    await write(gateway, token, old, "a")
    await write(gateway, token, new, "b")
    await gateway.ok(token, "link_state", src=new, rel="supersedes", dst=[old])
    assert warnings_of(await gateway.ok(token, "get_state", uris=[old])) == [
        f"{old} is superseded by {new}"
    ]
    await write(gateway, token, old, "a, revived", expect_version=1)
    assert warnings_of(await gateway.ok(token, "get_state", uris=[old])) == [
        f"{old} was superseded by {new} at v1; this note is at v2"
    ]


async def test_nothing_of_a_topic_the_token_cannot_read_shows_in_provenance(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    admin = agent_token(issuer, workspace, sub="writer")
    secret = f"bb://{workspace}/secret/basis"
    public = f"bb://{workspace}/pub/result"
    await write(gateway, admin, secret, "classified basis")
    await write(gateway, admin, public, "result", sources=[secret])
    await gateway.ok(admin, "link_state", src=public, rel="derived_from", dst=[secret])
    await gateway.ok(admin, "link_state", src=secret, rel="contradicts", dst=[public])
    await write(gateway, admin, secret, "classified basis v2", expect_version=1)
    await write(gateway, admin, public, "result v2", expect_version=1, sources=[secret])
    await write(gateway, admin, secret, "classified basis v3", expect_version=2)

    reader = agent_token(issuer, workspace, sub="reader", read=["pub"], write=["pub"])
    for mode in ("digest", "full"):
        answer = await gateway.ok(reader, "get_state", uris=[public], mode=mode)
        text = str(answer)
        assert "secret" not in text and "v3" not in text, answer
    listed = await gateway.ok(reader, "list_keys", topic="pub", mode="table")
    assert "secret" not in str(listed)
    # The writer, who reads both, is told.
    answer = await gateway.ok(admin, "get_state", uris=[public])
    assert f"{public} is derived from {secret} v1; it is at v3" in warnings_of(answer)


async def test_a_link_is_withdrawn_by_a_token_that_could_make_it_and_its_warning_stops(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, redis_url: str
) -> None:
    token = agent_token(issuer, workspace)
    plan = f"bb://{workspace}/plan/q3"
    doubt = f"bb://{workspace}/research/cache-hypothesis"
    await write(gateway, token, plan, "plan")
    await write(gateway, token, doubt, "doubt")
    await gateway.ok(token, "link_state", src=doubt, rel="contradicts", dst=[plan])

    # Could not have made it: may not write the source's topic, or may not read the target's.
    for sub, read, write_scope in (("planner", ["*"], ["plan"]), ("blind", ["research"], ["*"])):
        other = agent_token(issuer, workspace, sub=sub, read=read, write=write_scope)
        is_error, refused = await gateway.call(
            other, "link_state", src=doubt, rel="contradicts", dst=[plan], remove=True
        )
        assert is_error and refused["error"]["code"] == "forbidden", (sub, refused)
    assert warnings_of(await gateway.ok(token, "get_state", uris=[plan])) != []

    # A relation or target that names no link is refused, naming what was not found.
    is_error, refused = await gateway.call(
        token, "link_state", src=doubt, rel="supersedes", dst=[plan], remove=True
    )
    assert is_error and refused["error"]["code"] == "not_found", refused
    assert "has no supersedes link" in refused["error"]["message"]
    is_error, refused = await gateway.call(
        token, "link_state", src=doubt, rel="contradicts", dst=[plan], remove="yes"
    )
    assert is_error and refused["error"]["code"] == "invalid_argument", refused

    # Another agent with the same scopes as the maker withdraws it.
    peer = agent_token(issuer, workspace, sub="peer", read=["*"], write=["research"])
    answer = await gateway.ok(
        peer, "link_state", src=doubt, rel="contradicts", dst=[plan], remove=True
    )
    assert answer["removed"] == [plan] and answer["linked"] == []
    for uri in (plan, doubt):
        read = await gateway.ok(token, "get_state", uris=[uri], mode="full")
        assert warnings_of(read) == [] and "links" not in read["items"][0], read
    # Nothing of the link is left in Redis, and the change log and audit keep both acts.
    raw = redis.Redis.from_url(redis_url)
    try:
        assert not raw.exists(f"bbla:{{{workspace}}}:research/cache-hypothesis")
        assert not raw.exists(f"bblo:{{{workspace}}}:research/cache-hypothesis")
        assert not raw.exists(f"bbli:{{{workspace}}}:plan/q3")
        ops = [(e[1][b"op"], e[1][b"author"]) for e in raw.xrange(f"bbc:{{{workspace}}}")]
    finally:
        raw.close()
    assert ops[-2:] == [(b"link", b"agent-1"), (b"unlink", b"peer")]
    # The audit is written off the call's path: wait for the removal's record to land.
    calls = await audited_calls(redis_url, workspace, until=("peer", "link_state"))
    assert ("agent-1", "link_state") in calls and ("peer", "link_state") in calls


async def audited_calls(
    redis_url: str, workspace: str, *, until: tuple[str, str]
) -> list[tuple[str, str]]:
    """(subject, tool) of the workspace's audit records, read as they arrive until ``until``
    is among them (each blocking read bounded; a record that never comes fails the test)."""
    client = aioredis.Redis.from_url(redis_url)
    calls: list[tuple[str, str]] = []
    last = "0"
    try:
        for _ in range(10):
            replies = await client.xread({f"bbau:{{{workspace}}}": last}, block=2000)
            for _stream, entries in replies:
                for entry_id, fields in entries:
                    last = entry_id.decode()
                    calls.append((fields[b"sub"].decode(), fields[b"tool"].decode()))
            if until in calls:
                return calls
    finally:
        await client.aclose()
    raise AssertionError(f"no audit record {until}: {calls}")


async def test_sources_must_exist_as_a_links_ends_must(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, redis_url: str
) -> None:
    token = agent_token(issuer, workspace)
    nope = f"bb://{workspace}/plan/nope"
    uri = f"bb://{workspace}/research/claim"
    for extra in ({"body": "b"}, {"append": "a line"}):
        is_error, refused = await gateway.call(
            token, "update_state", uri=uri, digest="d", sources=[nope], **extra
        )
        assert is_error and refused["error"]["code"] == "not_found", refused
        assert refused["error"]["message"] == f"no note at {nope}"
        is_error, linked = await gateway.call(
            token, "link_state", src=uri, rel="derived_from", dst=[nope]
        )
        assert is_error and linked["error"]["code"] == "not_found"
    answer = await gateway.ok(token, "get_state", uris=[uri])
    assert answer["items"][0]["error"] == "not_found"
    raw = redis.Redis.from_url(redis_url)
    try:
        assert raw.get(f"bbq:{{{workspace}}}") is None  # nothing was committed
    finally:
        raw.close()
    # A source that exists is recorded with its version, for appends as for writes.
    plan = f"bb://{workspace}/plan/real"
    await write(gateway, token, plan, "real plan")
    await gateway.ok(token, "update_state", uri=uri, digest="d", append="a", sources=[plan])
    await write(gateway, token, plan, "real plan v2", expect_version=1)
    answer = await gateway.ok(token, "get_state", uris=[uri])
    assert warnings_of(answer) == [f"{uri} was written from {plan} v1; it is at v2"]


async def test_deleting_a_note_leaves_no_version_record_of_its_links(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, redis_url: str
) -> None:
    token = agent_token(issuer, workspace)
    a, b = f"bb://{workspace}/t/a", f"bb://{workspace}/t/b"
    await write(gateway, token, a, "a")
    await write(gateway, token, b, "b")
    await gateway.ok(token, "link_state", src=a, rel="cites", dst=[b])
    await gateway.ok(token, "link_state", src=b, rel="refines", dst=[a])
    admin = admin_token(issuer, workspace)
    deleted = await gateway.http.post(
        "/admin/delete",
        json={"uri": b, "confirm": True},
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert deleted.status_code == httpx.codes.OK, deleted.text
    raw = redis.Redis.from_url(redis_url)
    try:
        assert raw.hkeys(f"bbla:{{{workspace}}}:t/a") == []
        assert not raw.exists(f"bbla:{{{workspace}}}:t/b")
    finally:
        raw.close()
    assert warnings_of(await gateway.ok(token, "get_state", uris=[a])) == []


async def test_provenance_survives_an_export_and_an_import(board: Board) -> None:
    def u(ws: str, path: str) -> str:
        return f"bb://{ws}/{path}"

    async def put(uri: str, text: str, **extra: Any) -> None:
        await board.update_state(
            UpdateState.parse({"uri": uri, "digest": text, "body": text, **extra}), author="me"
        )

    await put(u("w1", "plan/q3"), "plan v1")
    await put(u("w1", "research/f"), "finding", sources=[u("w1", "plan/q3")])
    await put(u("w1", "research/d"), "doubt")
    await board.link_state(
        LinkState.parse(
            {"src": u("w1", "research/d"), "rel": "contradicts", "dst": [u("w1", "plan/q3")]}
        ),
        author="me",
    )
    await put(u("w1", "plan/q3"), "plan v2", expect_version=1)
    records = [record async for record in board.export_notes("w1")]
    checked = [check_record(r, source="w1", target="w2") for r in records]
    await board.import_notes(lambda: checked, workspace="w2", replace=False, author="me")

    def read(ws: str) -> Any:
        return board.get_state(
            GetState.parse({"uris": [u(ws, "research/f"), u(ws, "plan/q3")]}), readable=every_topic
        )

    for ws in ("w1", "w2"):
        answer = await read(ws)
        assert answer["warnings"] == [
            f"{u(ws, 'research/f')} was written from {u(ws, 'plan/q3')} v1; it is at v2",
            f"{u(ws, 'plan/q3')} was contradicted by {u(ws, 'research/d')} at v1; "
            "this note is at v2",
        ], ws


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        (["garbage"], "must start with bb://"),
        (["bb://elsewhere/t/a"], "is in another workspace"),
        (["bb://w1/t/a@2"], "takes the note's address"),
    ],
    ids=["not-an-address", "another-workspace", "a-version"],
)
def test_an_import_refuses_sources_a_write_would_refuse(sources: list[str], message: str) -> None:
    record = {
        "uri": "bb://w1/t/b", "kind": "text", "version": 1, "digest": "d", "content": "c",
        "offloaded": False, "columns": None, "sources": sources, "confidence": None,
        "author": "a", "origin": "", "size": 1, "est_tokens": 1, "digest_tokens": 1,
        "body_tokens": 1, "nrows": 0, "created": 1, "updated": 1, "seq": 1, "links": [],
    }  # fmt: skip
    with pytest.raises(InvalidArgument) as refused:
        check_record(record, source="w1", target="w1")
    assert message in refused.value.message


async def test_many_notes_moved_on_are_named_once_each_in_one_line_per_relation(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace)
    hub = f"bb://{workspace}/t/hub"
    cited = [f"bb://{workspace}/c/n{i}" for i in range(3)]
    await write(gateway, token, hub, "hub")
    for uri in cited:
        await write(gateway, token, uri, "v1")
    await gateway.ok(token, "link_state", src=hub, rel="cites", dst=cited)
    for uri in cited[:2]:
        await write(gateway, token, uri, "v2", expect_version=1)
    # The third is deleted: its link goes with it, and nothing is said of it.
    deleted = await gateway.http.post(
        "/admin/delete",
        json={"uri": cited[2]},
        headers={"Authorization": f"Bearer {admin_token(issuer, workspace)}"},
    )
    assert deleted.status_code == httpx.codes.OK, deleted.text
    answer = await gateway.ok(token, "get_state", uris=[hub])
    assert warnings_of(answer) == [
        f"{hub} cites notes written since: {cited[0]} v1 (now v2), {cited[1]} v1 (now v2)"
    ]


@pytest.mark.parametrize(
    ("sources", "source_at", "links_at"),
    [
        ('["bb://w/t/a"]', "not json", {"cites\tt/a": "x\ty"}),
        ('{"a": 1}', "[1]", {"no tab": "1\t1"}),
        ('["garbage", 7]', '["1", true]', {"cites\tt/a": ""}),
    ],
    ids=["not-json", "wrong-shapes", "wrong-types"],
)
async def test_provenance_records_not_as_a_write_stores_them_are_passed_over(
    gateway: InProcessGateway,
    issuer: TokenIssuer,
    workspace: str,
    redis_url: str,
    sources: str,
    source_at: str,
    links_at: dict[str, str],
) -> None:
    token = agent_token(issuer, workspace)
    note, other = f"bb://{workspace}/t/n", f"bb://{workspace}/t/a"
    await write(gateway, token, other, "a")
    await write(gateway, token, note, "n", sources=[other])
    await gateway.ok(token, "link_state", src=note, rel="cites", dst=[other])
    raw = redis.Redis.from_url(redis_url)
    try:
        raw.hset(
            f"bbn:{{{workspace}}}:t/n", mapping={FIELD.sources: sources, FIELD.source_at: source_at}
        )
        raw.hset(f"bbla:{{{workspace}}}:t/n", mapping=links_at)
    finally:
        raw.close()
    for tool, arguments in (
        ("get_state", {"uris": [note], "mode": "digest"}),
        ("list_keys", {"topic": "t", "mode": "table"}),
        ("search_keys", {"q": "n"}),
    ):
        is_error, answer = await gateway.call(token, tool, **arguments)
        assert not is_error, (tool, answer)


async def test_a_note_judges_at_most_256_links_each_way_and_says_the_rest_plainly(
    board: Board,
) -> None:
    target = "bb://w/plan/q3"
    await board.update_state(
        UpdateState.parse({"uri": target, "digest": "plan", "body": "v1"}), author="me"
    )
    doubters = [f"bb://w/research/d{i:03d}" for i in range(300)]
    for uri in doubters:
        await board.update_state(
            UpdateState.parse({"uri": uri, "digest": "doubt", "body": "no"}), author="me"
        )
        await board.link_state(
            LinkState.parse({"src": uri, "rel": "contradicts", "dst": [target]}), author="me"
        )
    await board.update_state(
        UpdateState.parse({"uri": target, "digest": "plan", "body": "v2", "expect_version": 1}),
        author="me",
    )
    answer = await board.get_state(GetState.parse({"uris": [target]}))
    # Judged: the first 256 by address; the other 44 are said as open, plainly.
    assert answer["warnings"] == [
        f"{target} is contradicted by {doubters[256]} and 43 more",
        f"{target} was contradicted by {doubters[0]} at v1 and 255 more; this note is at v2",
    ]


async def cite_notes_that_move_on(
    board: Board, hubs: list[str], cited: list[str], *, hub_body: str = "v1"
) -> None:
    """Each of ``hubs`` cites every one of ``cited``, and each cited note is written again."""
    for uri in hubs:
        await board.update_state(
            UpdateState.parse({"uri": uri, "digest": "hub", "body": hub_body}), author="me"
        )
    for uri in cited:
        await board.update_state(
            UpdateState.parse({"uri": uri, "digest": "v1", "body": "v1"}), author="me"
        )
    for uri in hubs:
        await board.link_state(
            LinkState.parse({"src": uri, "rel": "cites", "dst": cited}), author="me"
        )
    for uri in cited:
        await board.update_state(
            UpdateState.parse({"uri": uri, "digest": "v2", "body": "v2", "expect_version": 1}),
            author="me",
        )


async def test_a_full_read_asks_the_linked_notes_versions_with_its_content_in_two_round_trips(
    redis_url: str,
) -> None:
    # The fields and links first; then the body, with the versions now of the notes it cites,
    # in one round trip: provenance costs a read no round trip of its own.
    trips = RoundTrips()
    board = Board(client=trips.client(redis_url))
    await board.start()
    hub = "bb://trips/notes/hub"
    cited = [f"bb://trips/{topic}/n{i}" for topic in ("a", "b") for i in range(3)]
    try:
        await cite_notes_that_move_on(board, [hub], cited)
        trips.count = 0
        answer = await board.get_state(GetState.parse({"uris": [hub], "mode": "full"}))
        assert trips.count == 2
    finally:
        await board.close()
    assert answer["items"][0]["body"] == "v1"
    assert answer["warnings"] == [
        f"{hub} cites notes written since: " + ", ".join(f"{uri} v1 (now v2)" for uri in cited)
    ]


async def test_reads_of_linked_notes_stay_within_every_budget_though_planned_before_judged(
    board: Board,
) -> None:
    # The plan counts the links' plain warnings; the judged ones, longer here, come with the
    # content: whatever the budget, the answer's exact cost stays within it.
    hubs = [f"bb://w/t/hub{i}" for i in range(3)]
    await cite_notes_that_move_on(
        board, hubs, [f"bb://w/c/n{i}" for i in range(12)], hub_body="word " * 120
    )
    shown = set()
    for budget in range(60, 2400, 23):
        try:
            answer = await board.get_state(
                GetState.parse({"uris": hubs, "mode": "full", "budget_tokens": budget})
            )
        except InvalidArgument:
            continue  # not even the envelope fits
        assert answer["spent_tokens"] <= budget, budget
        shown.add(len(answer["items"]))
        for item in answer["items"]:
            if "body" in item and "cut" not in item:
                assert f"{item['uri']} cites notes written since: " in " ".join(
                    answer.get("warnings", [])
                )
    assert shown >= {1, 2, 3}
