"""The gateway's direct path for tools/call answers exactly as the SDK's path would.

Two gateway apps on one Redis: one with direct tool calls on (the default) and one with
``direct_tool_calls`` off, where every request goes through the SDK (in this process; the
listen's stream is read off two real gateway processes, as a stream needs a socket). Each
example is one raw POST sent to both; the answers must agree in HTTP status, content type
and body (as JSON, since key order and number spelling may differ). The
requests vary everything the SDK looks at before a tool runs: protocol version header (both
eras, unknown, duplicated), the 2026-07-28 envelope and routing headers, Accept and
Content-Type, the JSON-RPC envelope, the call's params and arguments. Plain requests must
take the direct path (counted by ``bb_direct_tool_calls``); that is what makes the
comparison a test of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
import redis
from app_support import MCP_PATH, InProcessGateway, direct_and_sdk_gateways_in_a_loop
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support import GatewayProcess, agent_token, call

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis
from blackboard_mcp.store.connection._key_names import INDEX_NAME, digest_index
from blackboard_mcp.testing import listen_request

MODERN = "2026-07-28"
HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
READ_TOOLS = ("get_state", "list_keys", "search_keys")
DIRECT_COUNTER = re.compile(rb"^bb_direct_tool_calls_total (\S+)$", re.MULTILINE)
LISTEN_COUNTER = re.compile(rb"^bb_direct_listens_total (\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class Exchange:
    """One POST: its headers (a list, so that a header can repeat) and its body."""

    headers: list[tuple[str, str]]
    body: bytes
    plain: bool  # built with no deviation at all: must take the direct path


@dataclass(frozen=True)
class Gateways:
    """The two apps, held open on one event loop for the module (the property's examples
    are synchronous): ``direct`` with direct tool calls on, ``sdk`` with them off."""

    runner: asyncio.Runner
    direct: InProcessGateway
    sdk: InProcessGateway

    def post(
        self, gateway: InProcessGateway, exchange: Exchange, path: str = MCP_PATH
    ) -> httpx.Response:
        return self.runner.run(
            gateway.http.post(path, content=exchange.body, headers=httpx.Headers(exchange.headers))
        )

    def direct_calls(self, counter: re.Pattern[bytes] = DIRECT_COUNTER) -> float:
        found = counter.search(self.runner.run(self.direct.http.get("/metrics")).content)
        return float(found.group(1)) if found else 0.0


@pytest.fixture(scope="module")
def gateways(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateways]:
    workdir = tmp_path_factory.mktemp("direct-calls")
    with direct_and_sdk_gateways_in_a_loop(redis_server.url, workdir) as (runner, direct, sdk):
        yield Gateways(runner, direct, sdk)


@pytest.fixture(scope="module")
def still_search_scores(redis_server: EmbeddedRedis) -> Iterator[None]:
    """The search indexes' garbage collector held off for the module, after one run now.

    A search's scores follow the index's word statistics, which the collector updates in
    the background (every 30 s) once notes were deleted, as earlier tests' flushes delete
    them: between the two paths' answers to one request, the scores could change."""
    client = redis.Redis.from_url(redis_server.url)
    setting = "FORK_GC_RUN_INTERVAL"
    was = client.execute_command("FT.CONFIG", "GET", setting)[setting.encode()]
    client.execute_command("FT.CONFIG", "SET", setting, 86_400)
    for index in (INDEX_NAME, digest_index(INDEX_NAME)):
        with contextlib.suppress(redis.ResponseError):  # not made yet: nothing to collect
            client.execute_command("FT.DEBUG", "GC_FORCEINVOKE", index)
    try:
        yield
    finally:
        client.execute_command("FT.CONFIG", "SET", setting, was)
        client.close()


@pytest.fixture(scope="module")
def board_token(
    issuer: TokenIssuer, gateways: Gateways, still_search_scores: None
) -> tuple[str, str]:
    """A workspace with a few notes in it, and a token that may read and write all of it;
    its search scores stay as they are for the module (``still_search_scores``)."""
    workspace = "ws-direct-" + uuid.uuid4().hex[:8]
    token = agent_token(issuer, workspace, sub="direct-" + uuid.uuid4().hex[:8])
    for i in range(6):
        answer = gateways.post(
            gateways.direct,
            plain_exchange(
                token,
                "update_state",
                {
                    "uri": f"bb://{workspace}/notes/n{i}",
                    "digest": f"seeded note {i} about apples",
                    "body": f"body {i}",
                },
                version=MODERN if i % 2 else "2025-06-18",
            ),
        )
        assert answer.status_code == 200 and not answer.json()["result"]["isError"]
    return workspace, token


def envelope_meta(version: str) -> dict[str, Any]:
    return {VERSION_KEY: version, CAPABILITIES_KEY: {}, INFO_KEY: {"name": "t", "version": "1"}}


def plain_exchange(
    token: str, tool: str, arguments: dict[str, Any], *, version: str, request_id: Any = 1
) -> Exchange:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    headers = [
        ("authorization", f"Bearer {token}"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", version),
    ]
    if version == MODERN:
        params["_meta"] = envelope_meta(version)
        headers += [("mcp-method", "tools/call"), ("mcp-name", tool)]
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return Exchange(headers, orjson.dumps(body), plain=True)


# One kept-alive client for the listen's processes: a connection per request would dominate.
_http = httpx.Client(timeout=10.0)


def post(gateway: GatewayProcess, exchange: Exchange) -> httpx.Response:
    return _http.post(
        gateway.mcp_url, content=exchange.body, headers=httpx.Headers(exchange.headers)
    )


def direct_calls(gateway: GatewayProcess, counter: re.Pattern[bytes] = DIRECT_COUNTER) -> float:
    found = counter.search(_http.get(gateway.url + "/metrics").content)
    return float(found.group(1)) if found else 0.0


def same_answer(direct: httpx.Response, sdk: httpx.Response) -> None:
    assert direct.status_code == sdk.status_code, (direct.text, sdk.text)
    assert direct.headers.get("content-type") == sdk.headers.get("content-type")
    assert "mcp-session-id" not in direct.headers
    if sdk.headers.get("content-type") == "application/json" and sdk.content:
        assert direct.json() == sdk.json()
    else:
        assert direct.content == sdk.content


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**62), 2**62), st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def tool_arguments(draw: st.DrawFn, workspace: str) -> tuple[str, Any, bool]:
    """A tool name and arguments: mostly real reads, sometimes nonsense; never a valid write."""
    choice = draw(st.sampled_from(["get_state", "list_keys", "search_keys", "bad_write", "odd"]))
    if choice == "get_state":
        uris = draw(
            st.lists(
                st.sampled_from(
                    [f"bb://{workspace}/notes/n{i}" for i in range(8)]
                    + ["bb://other/notes/n1", "not an address", f"bb://{workspace}/x/.."]
                ),
                max_size=4,
            )
        )
        args: dict[str, Any] = {"uris": uris}
        if draw(st.booleans()):
            args["mode"] = draw(st.sampled_from(["digest", "ref", "fields", "bogus"]))
        return "get_state", args, True
    if choice == "list_keys":
        args = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "topic": st.sampled_from(["notes", "empty", "BAD TOPIC"]),
                    "limit": st.integers(-1, 300),
                    "mode": st.sampled_from(["digest", "table", "ref", "full"]),
                    "order": st.sampled_from(["name", "version", "sideways"]),
                },
            )
        )
        return "list_keys", args, True
    if choice == "search_keys":
        args = {"q": draw(st.sampled_from(["apples", "seeded note", "", "nothing-here", "a*"]))}
        if draw(st.booleans()):
            args["limit"] = draw(st.integers(-1, 60))
        return "search_keys", args, True
    if choice == "bad_write":
        # Every one is refused before anything is written, so both gateways see one board.
        bad = draw(
            st.sampled_from(
                [
                    {"uri": f"bb://{workspace}/w/a", "body": "no digest"},
                    {"uri": "nope", "digest": "d", "body": "b"},
                    {"uri": f"bb://{workspace}/w/a", "digest": "d", "colour": "red"},
                ]
            )
        )
        return draw(st.sampled_from(["update_state", "link_state"])), bad, True
    tool = draw(st.sampled_from([*READ_TOOLS, "no_such_tool", ""]))
    return tool, draw(json_values), False


@st.composite
def exchanges(draw: st.DrawFn, workspace: str, token: str) -> Exchange:
    plain = True

    def deviate(probability_pct: int = 15) -> bool:
        nonlocal plain
        happened = draw(st.integers(0, 99)) < probability_pct
        plain = plain and not happened
        return happened

    tool, arguments, arguments_plain = draw(tool_arguments(workspace))
    plain = plain and arguments_plain and isinstance(arguments, dict)
    version: str | None = draw(st.sampled_from([MODERN, MODERN, *HANDSHAKE]))
    if deviate(10):
        version = draw(st.sampled_from([None, "2099-01-01", "", "2026-07-29"]))
    headers: list[tuple[str, str]] = [("authorization", f"Bearer {token}")]
    if not deviate(10):
        headers.append(("content-type", "application/json"))
    elif draw(st.booleans()):
        headers.append(
            (
                "content-type",
                draw(
                    st.sampled_from(
                        ["text/plain", "application/json; charset=utf-8", "Application/JSON"]
                    )
                ),
            )
        )
    accept = "application/json, text/event-stream"
    if deviate(10):
        accept = draw(st.sampled_from(["", "text/event-stream", "*/*", "application/*"]))
    if accept:
        headers.append(("accept", accept))
    if version is not None:
        headers.append(("mcp-protocol-version", version))
        if deviate(5):
            headers.append(("mcp-protocol-version", version))

    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    modern = version is not None and version not in HANDSHAKE
    if modern:
        meta: dict[str, Any] = envelope_meta(MODERN)
        if deviate(10):
            meta = draw(
                st.sampled_from(
                    [
                        {},
                        {VERSION_KEY: MODERN},
                        {VERSION_KEY: "2025-06-18", CAPABILITIES_KEY: {}},
                        {VERSION_KEY: MODERN, CAPABILITIES_KEY: "none"},
                        {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}, INFO_KEY: {"name": 3}},
                    ]
                )
            )
        params["_meta"] = meta
        method_header, name_header = "tools/call", tool
        if deviate(10):
            method_header = draw(st.sampled_from(["", "tools/list"]))
        if deviate(10):
            name_header = draw(st.sampled_from(["", "get_state", "other"]))
        if method_header:
            headers.append(("mcp-method", method_header))
        if name_header:
            headers.append(("mcp-name", name_header))
    elif deviate(10):
        params["_meta"] = draw(
            st.sampled_from(
                [{}, {"progressToken": 5}, {"progressToken": [1]}, envelope_meta(MODERN)]
            )
        )
    if deviate(5):
        params["extra"] = 1
    if deviate(5):
        del params["arguments"]

    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": draw(st.one_of(st.integers(-1000, 1000), st.text(max_size=6))),
        "method": "tools/call",
        "params": params,
    }
    if deviate(5):
        message["id"] = draw(st.sampled_from([None, 1.5, True, 2**60, [1]]))
    if deviate(5):
        message["jsonrpc"] = "1.0"
    if deviate(5):
        message["method"] = draw(st.sampled_from(["tools/list", "ping", "tools/call "]))
    if deviate(5):
        message["extra"] = True
    if deviate(5):
        del message["id"]  # a notification
    if deviate(3):
        message["params"] = draw(st.sampled_from([None, [], "x"]))
    body = orjson.dumps(message)
    if deviate(3):
        body = draw(st.sampled_from([b"{", b"[]", b"", body + b"x", b"[" + body + b"]"]))
    return Exchange(headers, body, plain)


def test_a_plain_call_of_each_protocol_version_takes_the_direct_path_and_answers_as_the_sdk(
    gateways: Gateways, board_token: tuple[str, str]
) -> None:
    workspace, token = board_token
    calls = [
        ("get_state", {"uris": [f"bb://{workspace}/notes/n1", f"bb://{workspace}/notes/n9"]}),
        ("list_keys", {"topic": "notes", "mode": "table"}),
        ("search_keys", {"q": "apples"}),
        ("get_state", {"uris": ["bb://someone-else/notes/n1"]}),  # a tool error
    ]
    for version in (*HANDSHAKE, MODERN):
        for tool, arguments in calls:
            exchange = plain_exchange(token, tool, arguments, version=version, request_id="r-1")
            before = gateways.direct_calls()
            direct = gateways.post(gateways.direct, exchange)
            assert gateways.direct_calls() == before + 1, (version, tool)
            same_answer(direct, gateways.post(gateways.sdk, exchange))
            result = direct.json()["result"]
            assert orjson.loads(result["content"][0]["text"]) == result["structuredContent"]
            assert ("resultType" in result) == (version == MODERN)
            if arguments.get("uris", [""])[0].startswith(f"bb://{workspace}/"):
                # Were the board empty, every read would agree trivially.
                found, missing = result["structuredContent"]["items"]
                assert found["digest"] == "seeded note 1 about apples"
                assert missing["error"] == "not_found"


def test_both_spellings_of_the_endpoint_answer_with_no_redirect(
    gateways: Gateways, board_token: tuple[str, str]
) -> None:
    _, token = board_token
    exchange = plain_exchange(token, "search_keys", {"q": "apples"}, version=MODERN)
    answers = [gateways.post(gateways.direct, exchange, path) for path in ("/mcp", "/mcp/")]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()
    assert answers[0].json()["result"]["structuredContent"]["items"]


def test_writes_through_the_direct_path_answer_as_through_the_sdk(
    gateways: Gateways,
    issuer: TokenIssuer,
    redis_server: EmbeddedRedis,
) -> None:
    """The same sequence of writes on an empty workspace answers alike on both paths."""
    # One workspace name for both runs, emptied in between: token counts depend on the name.
    workspace = "ws-writes-" + uuid.uuid4().hex[:8]
    token = agent_token(issuer, workspace, sub="writer-" + uuid.uuid4().hex[:8])
    answers: dict[str, list[Any]] = {}
    for name, app in (("direct", gateways.direct), ("sdk", gateways.sdk)):
        with redis.Redis.from_url(redis_server.url) as client:
            for key in client.scan_iter(match=f"*{{{workspace}}}*"):
                client.delete(key)
        uri = f"bb://{workspace}/plan/step"
        steps: list[tuple[str, dict[str, Any]]] = [
            ("update_state", {"uri": uri, "digest": "first", "body": "a", "expect_version": 0}),
            ("update_state", {"uri": uri, "digest": "again", "body": "b", "expect_version": 0}),
            ("update_state", {"uri": uri, "digest": "second", "body": "c", "expect_version": 1}),
            ("update_state", {"uri": uri, "digest": "more", "append": " and d"}),
            ("update_state", {"uri": f"bb://{workspace}/plan/base", "digest": "base", "body": "e"}),
            (
                "link_state",
                {"src": uri, "rel": "derived_from", "dst": [f"bb://{workspace}/plan/base"]},
            ),
            ("link_state", {"src": uri, "rel": "likes", "dst": [f"bb://{workspace}/plan/base"]}),
            ("get_state", {"uris": [uri], "mode": "ref"}),
        ]
        replies = []
        for i, (tool, arguments) in enumerate(steps):
            version = MODERN if i % 2 else "2025-06-18"
            answer = gateways.post(app, plain_exchange(token, tool, arguments, version=version))
            assert answer.status_code == 200
            replies.append(orjson.loads(answer.content))
        answers[name] = replies
    assert answers["direct"] == answers["sdk"]
    assert [r["result"]["isError"] for r in answers["direct"]] == [
        False,
        True,
        False,
        False,
        False,
        False,
        True,
        False,
    ]


@settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_request_gets_the_same_answer_with_or_without_the_direct_path(
    gateways: Gateways,
    board_token: tuple[str, str],
    data: st.DataObject,
) -> None:
    workspace, token = board_token
    exchange = data.draw(exchanges(workspace, token))
    before = gateways.direct_calls()
    direct = gateways.post(gateways.direct, exchange)
    took_direct = gateways.direct_calls() > before
    event("direct path" if took_direct else "SDK path")
    if exchange.plain:
        assert took_direct, exchange
    same_answer(direct, gateways.post(gateways.sdk, exchange))


def test_the_python_sdk_clients_tool_calls_take_the_direct_path(
    gateways: Gateways, issuer: TokenIssuer, workspace: str
) -> None:
    token = agent_token(issuer, workspace, sub="sdk-client-" + uuid.uuid4().hex[:6])
    uri = f"bb://{workspace}/notes/one"
    before = gateways.direct_calls()

    async def calls() -> None:  # on the apps' loop: the module holds them open there
        async with gateways.direct.mcp_client(token) as client:
            err, body = await call(client, "update_state", uri=uri, digest="one", body="1")
            assert not err and body["version"] == 1
            err, body = await call(client, "get_state", uris=[uri])
            assert not err and body["items"][0]["digest"] == "one"
            err, body = await call(
                client, "update_state", uri=uri, digest="x", body="", expect_version=0
            )
            assert err and body["error"]["code"] == "conflict"
            listed = await client.list_tools()  # not a tool call: the SDK answers it
            assert len(listed.tools) == 5

    gateways.runner.run(calls())
    assert gateways.direct_calls() == before + 3


# What a JSON parser hands the gateway: orjson reads integers of at most 64 bits, and refuses
# a body with a larger one before any validation.
WIRE_INTEGERS = st.integers(min_value=-(2**63), max_value=2**64 - 1)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | WIRE_INTEGERS | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    version=st.sampled_from(HANDSHAKE),
    name=st.text(),
    arguments=st.none() | st.dictionaries(st.text(), JSON_VALUES, max_size=4),
)
def test_the_sdk_cannot_refuse_handshake_call_params_the_direct_path_accepts_without_meta(
    version: str, name: str, arguments: dict[str, Any] | None
) -> None:
    """Why the direct path skips the SDK's params validation for these: it cannot fail.

    The direct path takes params with only a str ``name`` and an object of ``arguments``
    (either may be missing). Were the SDK's model for any handshake version to refuse one
    of them, its error answer would differ from the direct path's.
    """
    from mcp_types import methods

    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = orjson.loads(orjson.dumps(arguments))  # as it comes off the wire
    methods.validate_client_request("tools/call", version, params)


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [("host", "evil.example:80", 421), ("origin", "http://evil.example", 403)],
)
def test_a_foreign_host_or_origin_is_refused_between_plain_calls_with_the_same_headers(
    gateways: Gateways, board_token: tuple[str, str], header: str, value: str, status: int
) -> None:
    """The header checks' verdicts are remembered per combination of headers: a refused
    combination must not borrow the verdict of an accepted one, nor the reverse."""
    _, token = board_token
    exchange = plain_exchange(token, "search_keys", {"q": "apples"}, version="2025-06-18")
    foreign = Exchange([*exchange.headers, (header, value)], exchange.body, plain=False)
    for _ in range(2):
        assert gateways.post(gateways.direct, exchange).status_code == 200
        refused = gateways.post(gateways.direct, foreign)
        assert refused.status_code == status
    assert gateways.post(gateways.direct, exchange).status_code == 200


# -- subscriptions/listen ----------------------------------------------------------------------


def _header(head: bytes, name: bytes) -> str:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode()
    return ""


def listen_frames(
    gateway: GatewayProcess,
    token: str,
    uris: list[str],
    *,
    until_end: bool,
    on_ack: Callable[[], None] | None = None,
) -> tuple[int, str, list[Any]]:
    """One raw listen: its status, content type, and the JSON of each event it sent (or of
    its JSON answer): the stream read to its end, or to its second event. ``on_ack`` runs
    once the acknowledgement has come."""
    parts = urlsplit(gateway.mcp_url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=20) as sock:
        sock.sendall(listen_request(parts.netloc, parts.path, token, uris, client="same"))
        data = b""
        while True:
            chunk = sock.recv(65536)
            assert chunk or until_end, data[-300:]
            data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            if not rest and not chunk:
                raise AssertionError(data[-300:])
            if not _:
                continue
            status = int(head.split(b" ", 2)[1])
            content_type = _header(head, b"content-type")
            if content_type == "application/json":
                if len(rest) >= int(_header(head, b"content-length")):
                    return status, content_type, [orjson.loads(rest)]
                continue
            # Chunked SSE: every event's data line is whole within its chunk.
            events = [
                orjson.loads(line[len(b"data: ") :])
                for line in rest.split(b"\r\n")
                if line.startswith(b"data: ")
            ]
            if events and on_ack is not None:
                on_ack()
                on_ack = None
            ended = rest.endswith(b"\r\n0\r\n\r\n")
            if ended or (not until_end and len(events) >= 2):
                return status, content_type, events
            assert chunk, data[-300:]


def test_a_listen_on_the_direct_path_sends_what_the_sdk_sends(
    gateway: GatewayProcess, sdk_gateway: GatewayProcess, issuer: TokenIssuer
) -> None:
    workspace = "ws-listen-" + uuid.uuid4().hex[:8]
    writer = agent_token(issuer, workspace, sub="listen-writer")
    follow = [f"bb://{workspace}/facts", f"bb://{workspace}/other/one"]
    answers = {}
    streams_before = direct_calls(gateway, LISTEN_COUNTER)
    for name, process in (("direct", gateway), ("sdk", sdk_gateway)):

        def write(name: str = name) -> None:  # once the listener is in place
            done = post(
                gateway,
                plain_exchange(
                    writer,
                    "update_state",
                    {"uri": f"bb://{workspace}/facts/{name}", "digest": "d", "body": ""},
                    version=MODERN,
                ),
            )
            assert not done.json()["result"]["isError"]

        token = agent_token(issuer, workspace, sub="listener")
        status, content_type, events = listen_frames(
            process, token, follow, until_end=False, on_ack=write
        )
        # A short-lived token: the stream ends at its expiry, with the listen's result.
        _, _, ended = listen_frames(
            process, agent_token(issuer, workspace, sub="brief", ttl=1), follow, until_end=True
        )
        refused = listen_frames(process, agent_token(issuer, "elsewhere"), follow, until_end=True)
        answers[name] = (status, content_type, events, ended, refused)
    # All three took the direct path: else the comparison would be of the SDK with itself.
    assert direct_calls(gateway, LISTEN_COUNTER) - streams_before == 3
    assert direct_calls(sdk_gateway, LISTEN_COUNTER) == 0
    direct, sdk = answers["direct"], answers["sdk"]
    assert direct[:2] == sdk[:2] == (200, "text/event-stream")
    ack, updated = direct[2]
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert updated["params"]["uri"] == f"bb://{workspace}/facts/direct"
    sdk_ack, sdk_updated = sdk[2]
    assert ack == sdk_ack
    sdk_updated["params"]["uri"] = updated["params"]["uri"]
    assert updated == sdk_updated
    assert direct[3] == sdk[3]
    assert direct[3][-1]["id"] == "same" and "result" in direct[3][-1]
    assert direct[4] == sdk[4]
    assert direct[4][0] != 200 and direct[4][2][0]["error"]["data"]["code"] == "forbidden"
