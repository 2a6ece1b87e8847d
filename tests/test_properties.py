"""Property tests: random and hostile arguments and tokens for all five tools, through the
gateway's app in process, with three invariants checked on every single example:

(a) the answer is a structured tool error with a documented code, or a correct answer in the
    documented shape; never an HTTP 5xx, never ``internal``, never a stack trace;
(b) nothing is written that the answer did not acknowledge: after an error, and after any
    read, every key of the workspace is byte-for-byte what it was; an acknowledged write
    touches only topics the token may write;
(c) nothing of a topic or workspace the token may not read ever shows up in an answer:
    secret notes carry unique marker words, and no marker the request did not contain may
    appear in the response.

Besides one property per tool and one for any tool name with any JSON arguments: tokens
(garbage, truncated, re-signed, odd claims) get a 401 or exactly their own scopes; an address
is accepted exactly when it follows the grammar; and a random sequence of writes with
expect_version ends where a model kept here says it must.

Each example is one raw JSON-RPC ``tools/call`` POST (stateless mode needs no initialize), so
the HTTP status is visible. Generation is derandomized so CI runs the same examples each time;
``--hypothesis-show-statistics`` shows how often each outcome came up. The board is checked
in Redis directly (key names from blackboard_mcp.store.connection._key_names): what an API
read would show is not enough to prove that nothing else was written.
"""

from __future__ import annotations

import asyncio
import functools
import json
import operator
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
import orjson
import pytest
import redis
from app_support import InProcessGateway, gateway_in_a_loop
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support import TEST_JWT_SECRET, agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis, TiktokenCounter
from blackboard_mcp.store.connection._field_names import FIELD

DOCUMENTED_CODES = frozenset(
    {
        "invalid_argument",
        "too_large",
        "not_found",
        "conflict",
        "forbidden",
        "unauthenticated",
        "rate_limited",
        "unavailable",
    }
)
ENVELOPE = frozenset({"items", "spent_tokens", "truncated", "omitted", "cursor"})
# What each read adds to the envelope: how it reports what the budget left out.
GET_EXTRA = frozenset({"omitted_at", "need_budget"})
LIST_EXTRA = frozenset({"table", "next", "need_budget"})
SEARCH_EXTRA = frozenset({"omitted_uris"})
COUNTER = TiktokenCounter()
WRITE_TOOLS = frozenset({"update_state", "link_state"})
RELATIONS = (
    "depends_on",
    "derived_from",
    "supersedes",
    "refines",
    "cites",
    "part_of",
    "contradicts",
)
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}
# A bb:// address as it may appear inside any answer: workspace and topic are plain names.
ADDRESS_PREFIX = re.compile(r"bb://([a-z0-9][a-z0-9._-]{0,63})/([a-z0-9][a-z0-9._-]{0,63})/")
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# The key segment rule the store enforces. The README's wording ("[A-Za-z0-9._~-], no ./../
# empty") is looser: the store also refuses a leading dot and segments over 128 characters.
SEGMENT = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,127}")

# When a property fails, hypothesis's pytest plugin imports libcst to suggest a patch, and
# libcst touches mypy_extensions.TypedDict, which warns; with filterwarnings = error that
# warning would replace the falsifying example in the report with an INTERNALERROR.
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

PROFILE = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- who is calling -----------------------------------------------------------------------------


def _glob(pattern: str, topic: str) -> bool:
    """A reference topic matcher, written independently of the product's: ``*`` is any run."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, topic, flags=re.DOTALL) is not None and "/" not in topic


@dataclass(frozen=True)
class Viewer:
    """What a token may see and change, as this test understands the documented scopes."""

    label: str
    header: str | None = field(repr=False)  # the Authorization header, None to send none
    workspace: str | None  # None: the token must be refused outright
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    caps: frozenset[str] = frozenset()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Falsifying examples print with hypothesis's pretty printer: leave the token out.
        printer.text(f"Viewer({self.label!r}, workspace={self.workspace!r}, read={self.read!r})")

    def can_read(self, workspace: str, topic: str) -> bool:
        return (
            workspace == self.workspace
            and "board_read" in self.caps
            and any(_glob(p, topic) for p in self.read)
        )

    def can_write(self, workspace: str, topic: str) -> bool:
        return (
            workspace == self.workspace
            and "board_write" in self.caps
            and any(_glob(p, topic) for p in self.write)
        )


# --- the wire -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    status: int
    text: str
    payload: Any
    www_authenticate: str | None


def post(
    runner: asyncio.Runner,
    gateway: InProcessGateway,
    header: str | None,
    tool: Any,
    arguments: Any,
) -> Reply:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    headers = dict(MCP_HEADERS)
    if header is not None:
        headers["Authorization"] = header.strip()  # h11 refuses edge whitespace
    response = runner.run(
        gateway.http.post(
            gateway.mcp_url,
            content=json.dumps(request, ensure_ascii=False, allow_nan=False).encode(),
            headers=headers,
        )
    )
    try:
        payload = response.json()
    except ValueError:
        payload = None
    return Reply(
        response.status_code, response.text, payload, response.headers.get("www-authenticate")
    )


def request_text(tool: Any, arguments: Any) -> str:
    return json.dumps([tool, arguments], ensure_ascii=False)


def assert_no_trace(reply: Reply) -> None:
    assert reply.status < 500, (reply.status, reply.text[:2000])
    assert "Traceback" not in reply.text, reply.text[:2000]
    assert 'File "' not in reply.text, reply.text[:2000]


def tool_answer(reply: Reply) -> tuple[bool, dict[str, Any]]:
    """Invariant (a) for one tools/call answer; returns (is_error, structured body)."""
    assert_no_trace(reply)
    assert reply.status == 200, (reply.status, reply.text[:2000])
    assert isinstance(reply.payload, dict) and "result" in reply.payload, reply.text[:2000]
    result = reply.payload["result"]
    is_error = result.get("isError")
    assert isinstance(is_error, bool), result
    body = result.get("structuredContent")
    assert isinstance(body, dict), result
    [content] = result["content"]
    assert content["type"] == "text" and json.loads(content["text"]) == body
    if is_error:
        assert set(body) == {"error"}, body
        error = body["error"]
        assert isinstance(error, dict), body
        assert error.get("code") in DOCUMENTED_CODES, error
        # Redis is up for the whole run: `unavailable` here would be the store masking a
        # failure of its own (a query it built that Redis refused, say) as an outage.
        assert error["code"] != "unavailable", error
        assert error["code"] != "rate_limited", "the test outran the gateway's rate limit"
        assert isinstance(error.get("message"), str) and error["message"], error
        assert isinstance(error.get("hint"), str) and error["hint"], error
    return is_error, body


def unauthenticated_answer(reply: Reply) -> None:
    assert_no_trace(reply)
    assert reply.status == 401, (reply.status, reply.text[:2000])
    assert reply.www_authenticate is not None and reply.www_authenticate.startswith("Bearer ")
    # A JSON-RPC error, the board's own fields in its data (blackboard_mcp/gateway/_edge.py).
    error = reply.payload["error"]["data"]
    assert error["code"] == "unauthenticated", error
    assert error["message"] and error["hint"], error


# --- the board as Redis holds it ----------------------------------------------------------------

Snapshot = dict[bytes, bytes | None]
# Workspace-wide keys: the sequence, change log, topics, blob references, blobs, the
# registry, and every kept version by time (note history).
SHARED_KINDS = frozenset({"bbq", "bbc", "bbw", "bbr", "bbb", "bbws", "bbhx"})


# One round trip for a fingerprint of every key: its DUMP, hashed inside Redis, so large
# bodies do not cross the wire twice per example.
_FINGERPRINTS = """
local out = {}
for i, key in ipairs(KEYS) do
  local dumped = redis.call('DUMP', key)
  if dumped then out[i] = redis.sha1hex(dumped) else out[i] = '' end
end
return out
"""


def _glob_escaped(text: str) -> str:
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


def snapshot(client: redis.Redis[bytes], workspaces: tuple[str, ...]) -> Snapshot:
    """Every key of these workspaces with a fingerprint of its value (the audit stream and the
    rate-limit counters, which every call changes, aside)."""
    # Matched by Redis, not here: the session's Redis holds every other test's keys too.
    names = sorted(
        {
            key
            for ws in workspaces
            for key in client.scan_iter(match=f"*{{{_glob_escaped(ws)}}}*", count=10_000)
            if not key.startswith((b"bbau:", b"bbrl:"))
        }
    )
    pipe = client.pipeline(transaction=False)
    pipe.eval(_FINGERPRINTS, len(names), *names)
    for ws in workspaces:
        pipe.sismember("bbws", ws)
    fingerprints, *members = pipe.execute()
    snap: Snapshot = dict(zip(names, fingerprints, strict=True))
    for ws, member in zip(workspaces, members, strict=True):
        snap[f"bbws:{{{ws}}}".encode()] = b"1" if member else None
    return snap


def classify(key: bytes) -> tuple[str, str, str]:
    """(kind, workspace, topic) of a board key; topic is "" for workspace-wide keys."""
    text = key.decode()
    kind, rest = text.split(":{", 1)
    workspace, _, tail = rest.partition("}")
    tail = tail.removeprefix(":")
    topic = re.split(r"[/:]", tail, maxsplit=1)[0] if kind not in SHARED_KINDS else ""
    return kind, workspace, topic


def assert_only_acknowledged_writes(
    viewer: Viewer, tool: str, acknowledged: bool, before: Snapshot, after: Snapshot
) -> None:
    """Invariant (b)."""
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if not (acknowledged and tool in WRITE_TOOLS):
        assert not changed, f"{tool} changed {changed} without acknowledging a write"
        return
    for key in changed:
        kind, workspace, topic = classify(key)
        assert workspace == viewer.workspace, f"{viewer.label} changed {key!r}"
        if kind in SHARED_KINDS:
            continue
        if kind == "bbli":  # a link target gains an incoming link; targets are reads
            assert viewer.can_read(workspace, topic), f"{viewer.label} changed {key!r}"
        else:
            assert viewer.can_write(workspace, topic), f"{viewer.label} changed {key!r}"


# --- the planted world --------------------------------------------------------------------------


@dataclass(eq=False)  # hashable by identity, so strategies built from it can be cached
class World:
    runner: asyncio.Runner  # the loop the gateway runs on, driven one call at a time
    gateway: InProcessGateway
    redis: redis.Redis[bytes]
    ws: str
    other_ws: str
    admin: Viewer
    narrow: Viewer
    reader: Viewer
    outsider: Viewer
    other_admin: Viewer
    scratch: Viewer
    marks: dict[str, str]  # what each marker word is planted as (name, digest, body, ...)
    markers: dict[str, tuple[str, str]]  # marker word -> (workspace, topic) it lives in
    secret_uri: str
    pub_uris: list[str]
    oracle_word: str
    oracle_uri: str
    source_names: list[str]
    outside_marker: str
    planted_files: list[Path]
    claims_subject: str = "prop-claims"

    @property
    def workspaces(self) -> tuple[str, ...]:
        return (self.ws, self.other_ws, str(self.scratch.workspace))

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"World(ws={self.ws!r})")  # falsifying examples print it: keep it short

    def admin_for(self, viewer: Viewer) -> Viewer:
        """A full-scope token of the viewer's workspace, for privileged read-backs."""
        for admin in (self.admin, self.other_admin, self.scratch):
            if admin.workspace == viewer.workspace:
                return admin
        raise AssertionError(f"no admin for {viewer.label}")

    def call(self, viewer: Viewer, tool: Any, arguments: Any) -> Reply:
        return post(self.runner, self.gateway, viewer.header, tool, arguments)

    def snapshot(self) -> Snapshot:
        return snapshot(self.redis, self.workspaces)


def _marker(kind: str) -> str:
    return f"zq{kind}{uuid.uuid4().hex[:10]}"


def _bearer(token: str) -> str:
    return f"Bearer {token}"


def _plant(world: World, arguments: dict[str, Any], viewer: Viewer | None = None) -> None:
    tool = "link_state" if "rel" in arguments else "update_state"
    is_error, body = tool_answer(world.call(viewer or world.admin, tool, arguments))
    assert not is_error, body


@pytest.fixture(scope="module")
def gateway_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("properties-gateway")


@pytest.fixture(scope="module")
def in_process(
    redis_server: EmbeddedRedis, gateway_workdir: Path
) -> Iterator[tuple[asyncio.Runner, InProcessGateway]]:
    """The gateway's app, held open on one event loop for the module's examples."""
    if not redis_server.running:  # another test may have stopped the session's Redis
        redis_server.start()
    with gateway_in_a_loop(redis_server.url, gateway_workdir) as running:
        yield running


@pytest.fixture(scope="module")
def world(
    in_process: tuple[asyncio.Runner, InProcessGateway],
    gateway_workdir: Path,
    issuer: TokenIssuer,
    redis_server: EmbeddedRedis,
) -> Iterator[World]:
    runner, gateway = in_process
    ws = "ws-prop-" + uuid.uuid4().hex[:10]
    other = "ws-prop-" + uuid.uuid4().hex[:10]
    full = frozenset({"board_read", "board_write", "file_read"})

    def viewer(
        label: str, workspace: str, read: list[str], write: list[str], caps: set[str]
    ) -> Viewer:
        token = agent_token(
            issuer, workspace, sub=f"prop-{label}", read=read, write=write, caps=sorted(caps)
        )
        return Viewer(label, _bearer(token), workspace, tuple(read), tuple(write), frozenset(caps))

    marks = {k: _marker(k) for k in ("name", "digest", "body", "cell", "pubx", "foreign", "col")}
    secret_uri = f"bb://{ws}/vault/{marks['name']}/plan"
    # source_path fixtures: the gateway's source root is "sources" in its working folder.
    source_root = gateway_workdir / "sources"
    assert source_root.is_dir()
    tag = uuid.uuid4().hex[:8]
    outside_marker = _marker("outside")
    outside = gateway_workdir / f"prop-outside-{tag}.txt"
    outside.write_text(f"outside the root: {outside_marker}\n")
    inside = [f"prop-{tag}.txt", f"prop-{tag}.csv", f"prop-link-{tag}.txt"]
    (source_root / inside[0]).write_text("# Notes\nOtters float.\n")
    (source_root / inside[1]).write_text("a,b\n1,2\n")
    (source_root / inside[2]).symlink_to(outside)  # a link out of the root
    oracle_word = _marker("oracle")
    client = redis.Redis.from_url(redis_server.url)
    world = World(
        runner=runner,
        gateway=gateway,
        redis=client,
        ws=ws,
        other_ws=other,
        admin=viewer("admin", ws, ["*"], ["*"], set(full)),
        narrow=viewer("narrow", ws, ["pub", "pub-*"], ["pub"], set(full)),
        reader=viewer("reader", ws, ["pub"], [], {"board_read"}),
        outsider=viewer("outsider", other, ["*"], ["*"], set(full)),
        other_admin=viewer("other-admin", other, ["*"], ["*"], set(full)),
        scratch=viewer("scratch", "ws-prop-" + uuid.uuid4().hex[:10], ["*"], ["*"], set(full)),
        marks=marks,
        markers={
            marks["name"]: (ws, "vault"),
            marks["digest"]: (ws, "vault"),
            marks["body"]: (ws, "vault"),
            marks["cell"]: (ws, "vault"),
            marks["col"]: (ws, "vault"),
            marks["pubx"]: (ws, "pubx"),
            marks["foreign"]: (other, "pub"),
            outside_marker: ("", ""),  # readable by nobody: it is outside the source root
        },
        secret_uri=secret_uri,
        pub_uris=[f"bb://{ws}/pub/{k}" for k in ("alpha", "sheet", "big", "a/b/c")]
        + [f"bb://{ws}/pub-notes/oracle"],
        oracle_word=oracle_word,
        oracle_uri=f"bb://{ws}/pub-notes/oracle",
        source_names=[
            *inside,
            f"../prop-outside-{tag}.txt",
            str(outside),
            f"./prop-{tag}.txt",
            f"sub/../prop-{tag}.txt",
            f"prop-{tag}.txt/..",
            f"prop-missing-{tag}.txt",
        ],
        outside_marker=outside_marker,
        planted_files=[outside, *(source_root / name for name in inside)],
    )
    shared = "Otters hold hands while they sleep"
    _plant(world, {"uri": f"bb://{ws}/pub/alpha", "digest": shared, "body": "otter facts"})
    _plant(
        world,
        {
            "uri": f"bb://{ws}/pub/sheet",
            "digest": "otter counts by river",
            "columns": ["river", "otters"],
            "rows": [["Tay", 12], ["Spey", None], ["Dee\\t", 3.5]],
        },
    )
    _plant(world, {"uri": f"bb://{ws}/pub/big", "digest": "a long otter log", "body": "o" * 12000})
    _plant(world, {"uri": f"bb://{ws}/pub/a/b/c", "digest": "deep otter", "body": "deep"})
    _plant(
        world,
        {"uri": world.oracle_uri, "digest": f"oracle note {oracle_word}", "body": "otter"},
    )
    _plant(world, {"uri": f"bb://{ws}/pub-notes/two", "digest": "second otter note", "body": ""})
    _plant(
        world,
        {
            "uri": secret_uri,
            "digest": f"the hidden otter plan {marks['digest']}",
            "body": f"otter secret plan {marks['body']} for the river",
            "sources": [f"bb://{ws}/pub/alpha"],
        },
    )
    _plant(
        world,
        {
            "uri": f"bb://{ws}/vault/ledger",
            "digest": f"vault otter ledger {marks['digest']}",
            "columns": ["who", marks["col"]],
            "rows": [["otter", marks["cell"]]],
        },
    )
    _plant(
        world,
        {"uri": f"bb://{ws}/pubx/near", "digest": f"near miss otter {marks['pubx']}", "body": "x"},
    )
    # Links from and to the hidden notes: a reader of pub must not learn their names.
    _plant(world, {"src": secret_uri, "rel": "contradicts", "dst": [f"bb://{ws}/pub/alpha"]})
    _plant(
        world, {"src": f"bb://{ws}/vault/ledger", "rel": "supersedes", "dst": [world.pub_uris[1]]}
    )
    _plant(world, {"src": f"bb://{ws}/pub/alpha", "rel": "cites", "dst": [secret_uri]})
    _plant(world, {"src": f"bb://{ws}/pubx/near", "rel": "contradicts", "dst": [world.oracle_uri]})
    _plant(
        world,
        {
            "uri": f"bb://{other}/pub/alpha",
            "digest": f"foreign otter {marks['foreign']}",
            "body": "",
        },
        world.outsider,
    )
    try:
        yield world
    finally:
        client.close()
        for path in world.planted_files:
            path.unlink(missing_ok=True)


# --- one checked call ---------------------------------------------------------------------------


def assert_nothing_hidden(world: World, viewer: Viewer, sent: str, reply: Reply) -> None:
    """Invariant (c): no hidden marker or hidden address the request itself did not carry."""
    for marker, (workspace, topic) in world.markers.items():
        if not viewer.can_read(workspace, topic) and marker not in sent:
            assert marker not in reply.text, f"{viewer.label} saw {marker} ({topic}): {reply.text}"
    for workspace, topic in ADDRESS_PREFIX.findall(reply.text):
        prefix = f"bb://{workspace}/{topic}/"
        # Only workspaces that hold data count; messages also show examples like bb://ws/t/k.
        if workspace in world.workspaces and not viewer.can_read(workspace, topic):
            # A refusal for another workspace names the address sent there, in the token's
            # own: an echo of the request, not of the board.
            echoed = workspace == viewer.workspace and (
                re.search(rf"bb://{NAME.pattern}/{re.escape(topic)}/", sent) is not None
            )
            assert prefix in sent or echoed, (
                f"{viewer.label} saw an address in {prefix}: {reply.text}"
            )


def checked_call(
    world: World, viewer: Viewer, tool: Any, arguments: Any
) -> tuple[bool, dict[str, Any]]:
    """One call with invariants (a), (b) and (c) checked; returns (is_error, body)."""
    sent = request_text(tool, arguments)
    before = world.snapshot()
    reply = world.call(viewer, tool, arguments)
    after = world.snapshot()
    if reply.status == 413:  # a request over BB_MAX_REQUEST_BYTES never reaches a tool
        event("HTTP 413")
        assert_no_trace(reply)
        assert reply.payload["error"]["data"]["code"] == "too_large", reply.text
        assert before == after
        return True, reply.payload
    if not isinstance(arguments, dict | None):
        # Arguments that are not a JSON object are refused by the MCP layer, before any tool:
        # a JSON-RPC "invalid params" error, never an internal one.
        assert_no_trace(reply)
        event("JSON-RPC error for non-object arguments")
        assert reply.payload["error"]["code"] == -32602, reply.text
        assert before == after
        return True, reply.payload
    if tool not in SHAPES:
        # Not one of the five: the spec's JSON-RPC "invalid params" error, the tool error
        # (code, message, hint) as its data.
        assert_no_trace(reply)
        event("JSON-RPC error for an unknown tool")
        assert reply.payload["error"]["code"] == -32602, reply.text
        assert set(reply.payload["error"]["data"]) == {"code", "message", "hint"}, reply.text
        assert before == after
        return True, reply.payload["error"]["data"]
    is_error, body = tool_answer(reply)
    # --hypothesis-show-statistics shows how often each outcome came up.
    name = tool if tool in SHAPES else "another tool"
    event(f"{viewer.label} {name}: {body['error']['code'] if is_error else 'ok'}")
    assert_nothing_hidden(world, viewer, sent, reply)
    assert_only_acknowledged_writes(viewer, str(tool), not is_error, before, after)
    if not is_error and isinstance(arguments, dict):
        SHAPES[tool](world, viewer, arguments, body)
    return is_error, body


# --- what a correct answer looks like, per tool -------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _address_of(uri: str) -> tuple[str, str]:
    workspace, topic, _ = uri.removeprefix("bb://").split("/", 2)
    return workspace, topic


def _envelope(body: dict[str, Any], budget: object, extra: frozenset[str]) -> None:
    assert ENVELOPE <= set(body) <= ENVELOPE | extra | {"warnings"}, body
    assert isinstance(body["items"], list) and all(isinstance(i, dict) for i in body["items"])
    # The budget is a ceiling on the whole answer, and spent_tokens is its exact cost: the
    # tokens of the tool result's text, which is this object serialized.
    limit = budget if _is_int(budget) else 2000
    assert _is_int(body["spent_tokens"]), body
    assert body["spent_tokens"] == COUNTER.count(orjson.dumps(body).decode()), body
    assert body["spent_tokens"] <= limit, (limit, body)
    assert isinstance(body["truncated"], bool), body
    assert _is_int(body["omitted"]) and body["omitted"] >= 0, body
    if "omitted_uris" in extra:
        assert isinstance(body["omitted_uris"], list), body
        assert body["omitted"] == len(body["omitted_uris"]), body
    assert _is_int(body["cursor"]) and body["cursor"] >= 0, body
    assert all(isinstance(w, str) for w in body.get("warnings", [])), body
    if body["omitted"]:
        assert body["truncated"], body


def _dedup(uris: list[str]) -> list[str]:
    return list(dict.fromkeys(uris))


def _update_shape(
    world: World, viewer: Viewer, args: Mapping[str, Any], body: dict[str, Any]
) -> None:
    assert set(body) == {"version", "digest", "warnings"}, body
    assert _is_int(body["version"]) and body["version"] >= 1, body
    assert body["digest"] == args["digest"], body
    assert all(isinstance(w, str) for w in body["warnings"]), body
    # Sources are reads: an acknowledged write cites only notes its caller may read.
    for source in args.get("sources") or []:
        assert viewer.can_read(*_address_of(source)), f"{viewer.label} cited {source}"
    expected = args.get("expect_version")
    if expected is not None:
        assert body["version"] == expected + 1, body
    # Acknowledged means stored: a full-scope read sees exactly this version and digest.
    _, read = tool_answer(world.call(world.admin_for(viewer), "get_state", {"uris": [args["uri"]]}))
    [item] = read["items"]
    assert (item["version"], item["digest"]) == (body["version"], body["digest"]), item
    if "source_path" in args:
        full = world.redis.hget(_note_key(args["uri"]), FIELD.body) or b""
        assert world.outside_marker.encode() not in full


def _note_key(uri: str) -> str:
    workspace, member = uri.removeprefix("bb://").split("/", 1)
    return f"bbn:{{{workspace}}}:{member}"


def _get_shape(world: World, viewer: Viewer, args: Mapping[str, Any], body: dict[str, Any]) -> None:
    _envelope(body, args.get("budget_tokens"), GET_EXTRA)
    uris = args["uris"] if isinstance(args["uris"], list) else [args["uris"]]
    shown = [i["uri"] for i in body["items"]]
    # Every distinct address asked for is answered exactly once: shown, not_found or omitted
    # (by its positions in uris).
    omitted = [uris[p] for first, last in body["omitted_at"] for p in range(first, last + 1)]
    assert sorted(shown + _dedup(omitted)) == sorted(_dedup(uris)), body
    assert body["omitted"] == len(_dedup(omitted)), body
    for item in body["items"]:
        if not viewer.can_read(*_address_of(item["uri"])):
            # Refused as the item, and nothing else said of it.
            assert item == {"uri": item["uri"], "error": "forbidden"}, item
            continue
        if "error" in item:
            # A past version or the catch-up note also says what to do.
            hinted = "@" in item["uri"] or item["uri"].endswith("/run/state/current")
            assert item == {"uri": item["uri"], "error": "not_found"} | (
                {"hint": item["hint"]} if hinted else {}
            ), item
        elif args.get("mode") == "fields":
            # uri and exactly the fields asked for (README, "Fields"): version and digest
            # only when named.
            named = args.get("fields") or []
            for key in ("version", "digest"):
                assert (key in item) == (key in named), (key, item)
            if "version" in item:
                assert _is_int(item["version"]) and item["version"] >= 1, item
        else:
            assert _is_int(item["version"]) and item["version"] >= 1, item
            assert isinstance(item["digest"], str) and item["digest"], item


def _list_shape(
    world: World, viewer: Viewer, args: Mapping[str, Any], body: dict[str, Any]
) -> None:
    _envelope(body, args.get("budget_tokens"), LIST_EXTRA)
    limit = args.get("limit") or 20
    topic = args.get("topic")
    if args.get("mode") == "table":
        lines = body["table"].split("\n")
        header = lines[0].split("\t")
        assert header[0] == "uri", body
        assert all(len(line.split("\t")) == len(header) for line in lines[1:]), body
        uris = [line.split("\t")[0] for line in lines[1:]]
        assert body["items"] == [], body
    else:
        uris = [i["uri"] for i in body["items"]]
    assert len(uris) + body["omitted"] <= limit, body
    assert len(set(uris)) == len(uris), body
    for uri in uris:
        workspace, note_topic = _address_of(uri)
        assert viewer.can_read(workspace, note_topic), uri
        assert topic is None or note_topic == topic, uri


def _search_shape(
    world: World, viewer: Viewer, args: Mapping[str, Any], body: dict[str, Any]
) -> None:
    _envelope(body, None, SEARCH_EXTRA)
    limit = args.get("limit") or 10
    assert len(body["items"]) <= limit, body
    for item in body["items"]:
        assert set(item) == {"uri", "digest", "score"}, item
        workspace, topic = _address_of(item["uri"])
        assert viewer.can_read(workspace, topic), item
        assert args.get("topic") in (None, topic), item
        assert isinstance(item["score"], float), item


def _link_shape(
    world: World, viewer: Viewer, args: Mapping[str, Any], body: dict[str, Any]
) -> None:
    assert set(body) == {"src", "rel", "linked", "warnings"}, body
    dst = args["dst"] if isinstance(args["dst"], list) else [args["dst"]]
    assert body["src"] == args["src"] and body["rel"] == args["rel"], body
    assert body["linked"] == _dedup(dst), body
    # Targets are reads: their names are shown back, and each gains an incoming link.
    for uri in dst:
        assert viewer.can_read(*_address_of(uri)), f"{viewer.label} linked to {uri}"


SHAPES: dict[Any, Callable[[World, Viewer, Mapping[str, Any], dict[str, Any]], None]] = {
    "update_state": _update_shape,
    "get_state": _get_shape,
    "list_keys": _list_shape,
    "search_keys": _search_shape,
    "link_state": _link_shape,
}


# --- strategies ---------------------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)


# Named functions rather than lambdas throughout: hypothesis describes strategies by their
# source, and describing a lambda means re-parsing this file.
def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)


def _exactly(unit: str, length: int) -> str:
    return (unit * length)[:length]


def _join_address(scheme: str, workspace: str, topic: str, segments: list[str]) -> str:
    return scheme + "/".join([workspace, topic, *segments])


def _retarget(old: str, new: str, uri: str) -> str:
    return uri.replace(old, new)


JSON_VALUES = st.recursive(SCALARS, _containers, max_leaves=6)


def _pick(often: st.SearchStrategy[Any], rarely: st.SearchStrategy[Any], n: int) -> Any:
    return rarely if n == 0 else often


def mostly(often: st.SearchStrategy[Any], rarely: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``often`` three draws in four (one_of weighs branches alike and merges repeats)."""
    return st.integers(0, 3).flatmap(functools.partial(_pick, often, rarely))


INTS = st.one_of(
    st.integers(-3, 25),
    st.sampled_from(
        [15, 16, 50, 51, 199, 200, 201, 2000, 100_000, 100_001, 2**63, 10**30, -(2**63)]
    ),
    st.integers(),
)
WRONG_INTS = st.sampled_from(["1", "10", "", "1e3", 1.0, 2.5, True, False, [1], {"n": 1}])
INT_ARGS = st.one_of(INTS, WRONG_INTS, JSON_VALUES)
PRINTABLE = st.characters(min_codepoint=0x21, max_codepoint=0x7E)
UNKNOWN_NAMES = st.one_of(
    st.sampled_from(
        ["URI", "Uri", "expectVersion", "uris ", "q", "uri", "uris", "mode", "topic", "src", "x"]
    ),
    st.text(min_size=1, max_size=10),
)
VALID_TOPICS = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,8}", fullmatch=True)
VALID_SEGMENTS = st.from_regex(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,8}", fullmatch=True)
KEYS = st.one_of(
    st.sampled_from(["alpha", "sheet", "big", "a/b/c", "n1", "n2", "deep/er/key", "T~x_1-2.v"]),
    st.from_regex(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,6}", fullmatch=True),
)
SEGMENTS = st.one_of(
    VALID_SEGMENTS,
    st.sampled_from(
        ["", ".", "..", "...", ".hidden", "*", "**", "%2e%2e", "a b", "\u00e4", "x\n", "\x00", "?"]
    ),
    st.sampled_from(
        ["#", "\\", "x" * 128, "x" * 129, "~", "-", "_", "a/", "\u212a", "\uff0e\uff0e"]
    ),
    st.text(max_size=6),
)


@functools.cache
def name_values(world: World) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(
            [world.ws, world.other_ws, "pub", "pub-notes", "vault", "pubx", "run", "*", "pub*"]
        ),
        st.sampled_from(["", "PUB", world.ws.upper(), "pub ", " pub", "a" * 64, "a" * 65, "-x"]),
        st.sampled_from([".x", "_x", "x_y", "pub/..", "vault\x00", "p\u00fcb", "pub\n", "{x}"]),
        VALID_TOPICS,
        st.text(max_size=6),
    )


@functools.cache
def hostile_addresses(world: World) -> st.SearchStrategy[str]:
    ws = world.ws
    fixed = [
        world.secret_uri,
        f"bb://{ws}/vault/ledger",
        f"bb://{ws}/pubx/near",
        f"bb://{world.other_ws}/pub/alpha",
        f"bb://{ws}/pub/../vault/ledger",
        f"bb://{ws}/pub/./alpha",
        f"bb://{ws}/pub//alpha",
        f"bb://{ws}/pub/alpha/",
        f"bb://{ws}/pub/alpha/../../vault/ledger",
        f"bb://{ws}/pub/%2e%2e/vault/ledger",
        f"bb://{ws}/pub",
        f"bb://{ws}/",
        f"bb://{ws}/*/ledger",
        f"bb://{ws}/pub/*",
        "bb://*/pub/alpha",
        f"BB://{ws}/pub/alpha",
        f"bb://{ws.upper()}/pub/alpha",
        f" bb://{ws}/pub/alpha",
        f"bb://{ws}/pub/alpha ",
        f"bb://{ws}/pub/alpha\n",
        f"bb://{ws}/pub/alpha\x00",
        f"bb://{ws}/pub/" + "a" * 500,
        f"bb://{ws}/pub/" + "/".join(["k"] * 16),
        f"bb://{ws}/pub/" + "/".join(["k"] * 17),
        f"bb://{ws}/pub/" + "/".join(["k" * 30] * 16),
        f"bb://{ws}}}/vault/ledger",
        f"bb://{{{ws}}}/pub/alpha",
        f"bb://{ws}/vault\\ledger",
        "bb://",
        "",
    ]
    built = st.builds(
        _join_address,
        st.sampled_from(["bb://", "bb://", "bb://", "BB://", "bb:/", "bb:///", "http://", ""]),
        name_values(world),
        name_values(world),
        st.lists(SEGMENTS, max_size=18),
    )
    return st.one_of(st.sampled_from(fixed), built, st.text(max_size=30))


@functools.cache
def writable_addresses(world: World) -> st.SearchStrategy[str]:
    """Addresses the narrow token may write: topic pub, existing notes or new ones."""
    return st.one_of(
        st.sampled_from(world.pub_uris[:4]),
        st.builds(operator.add, st.just(f"bb://{world.ws}/pub/"), KEYS),
    )


@functools.cache
def readable_addresses(world: World) -> st.SearchStrategy[str]:
    """Addresses the narrow token may read: pub, and pub-notes through its pub-* glob."""
    notes = f"bb://{world.ws}/pub-notes/"
    return st.one_of(
        writable_addresses(world),
        st.sampled_from([world.oracle_uri, notes + "two", notes + "absent"]),
    )


@functools.cache
def hidden_addresses(world: World) -> st.SearchStrategy[str]:
    """Existing notes the narrow token may not read: a well-formed call may still name them."""
    ws = world.ws
    return st.sampled_from([world.secret_uri, f"bb://{ws}/vault/ledger", f"bb://{ws}/pubx/near"])


@functools.cache
def addresses(world: World) -> st.SearchStrategy[str]:
    return st.one_of(readable_addresses(world), hostile_addresses(world))


def sized(chars: list[str], sizes: list[int]) -> st.SearchStrategy[str]:
    return st.builds(_exactly, st.sampled_from(chars), st.sampled_from(sizes))


DIGESTS = st.one_of(
    st.text(min_size=1, max_size=30),
    st.sampled_from(["", " ", "\n\t ", "otter", "\u200b", "\x00"]),
    sized(["d", "\u00e9", "\U0001f9a6"], [1000, 1001]),
    JSON_VALUES,
)
BODIES = st.one_of(
    st.text(max_size=40),
    sized(["x", "\u00e9"], [10 * 1024, 10 * 1024 + 1]),
    sized(["x"], [1024 * 1024 + 1, 2 * 1024 * 1024 + 1]),
    sized(["\u00e9"], [512 * 1024 + 1]),
    JSON_VALUES,
)
APPENDS = st.one_of(st.text(max_size=20), sized(["y"], [10 * 1024 + 1, 1024 * 1024 + 1]), SCALARS)
CELLS = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["\\t", "\\n", "a\tb", "a\nb", "a\rb", "", "x" * 4096, "x" * 4097]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    JSON_VALUES,
)
COLUMNS = st.one_of(
    st.lists(
        st.one_of(st.sampled_from(["a", "b", "name", "a\tb", "", "x\ny", "uri"]), CELLS),
        max_size=4,
    ),
    st.just([f"c{i}" for i in range(64)]),
    st.just([f"c{i}" for i in range(65)]),
    JSON_VALUES,
)
ROWS = st.one_of(
    st.lists(st.lists(CELLS, max_size=4), max_size=4),
    st.just([["1"]] * 10_000),
    st.just([["1"]] * 10_001),
    st.just([["x" * 4096] * 4] * 70),
    JSON_VALUES,
)
CONFIDENCES = st.one_of(
    st.floats(-1.0, 2.0), st.sampled_from(["0.5", True, 0, 1, -0.0, 1e-300]), JSON_VALUES
)


@functools.cache
def uri_lists(world: World) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(addresses(world), max_size=3),
        addresses(world),
        st.just([world.pub_uris[0]] * 64),
        st.just([f"bb://{world.ws}/pub/k{i}" for i in range(65)]),
        JSON_VALUES,
    )


def mutate(
    draw: st.DrawFn, args: dict[str, Any], fields: list[str], hostile: st.SearchStrategy[Any]
) -> dict[str, Any]:
    """Half the time nothing; else one or two of: a field replaced, dropped or nulled, or an
    unknown argument added."""
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        action = draw(st.sampled_from(["hostile", "drop", "null", "unknown"]))
        if action == "unknown":
            args[draw(UNKNOWN_NAMES)] = draw(JSON_VALUES)
            continue
        name = draw(st.sampled_from(fields))
        if action == "hostile":
            args[name] = draw(hostile)
        elif action == "drop":
            args.pop(name, None)
        else:
            args[name] = None
    return args


def maybe(draw: st.DrawFn, args: dict[str, Any], name: str, value: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        args[name] = draw(value)


GOOD_TEXT = st.text(min_size=1, max_size=30).filter(str.strip)
GOOD_CELLS = st.one_of(
    st.text(st.characters(exclude_characters="\t\n\r"), max_size=8),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.sampled_from(["\\t", "\\n", "\\"]),
)
GOOD_BODIES = st.one_of(st.text(max_size=40), sized(["x", "\u00e9"], [10 * 1024, 10 * 1024 + 1]))


@st.composite
def good_table(draw: st.DrawFn) -> tuple[list[str], list[list[Any]]]:
    columns = draw(st.lists(st.from_regex(r"[a-z]{1,4}", fullmatch=True), min_size=1, max_size=4))
    columns = list(dict.fromkeys(columns))
    width = len(columns)
    rows = draw(st.lists(st.lists(GOOD_CELLS, min_size=width, max_size=width), max_size=4))
    return columns, rows


@st.composite
def update_arguments(draw: st.DrawFn, world: World) -> dict[str, Any]:
    fields = ["uri", "digest", "body", "columns", "rows", "append", "expect_version"]
    hostile = st.one_of(JSON_VALUES, addresses(world))
    if draw(st.booleans()):  # a well-formed call, perhaps mutated
        uri = draw(mostly(writable_addresses(world), readable_addresses(world)))
        args: dict[str, Any] = {"uri": uri, "digest": draw(GOOD_TEXT)}
        form = draw(st.sampled_from(["body", "table", "append", "source_path", "none"]))
        if form == "body":
            args["body"] = draw(GOOD_BODIES)
        elif form == "table":
            args["columns"], args["rows"] = draw(good_table())
        elif form == "append":
            args["append"] = draw(GOOD_TEXT)
        elif form == "source_path":
            args["source_path"] = draw(st.sampled_from(world.source_names))
        if form != "append":
            maybe(draw, args, "expect_version", st.sampled_from([0, 1, 2]))
        # Now and then a source the caller may not read: citing it must be refused.
        sources = mostly(readable_addresses(world), hidden_addresses(world))
        maybe(draw, args, "sources", st.lists(sources, max_size=2))
        maybe(draw, args, "confidence", st.floats(0.0, 1.0))
        return mutate(draw, args, fields, hostile)
    args = {"uri": draw(addresses(world)), "digest": draw(DIGESTS)}
    form = draw(st.sampled_from(["body", "table", "append", "source_path", "several"]))
    if form in ("body", "several"):
        args["body"] = draw(BODIES)
    if form in ("table", "several"):
        args["columns"] = draw(COLUMNS)
        args["rows"] = draw(ROWS)
    if form == "append" or (form == "several" and draw(st.booleans())):
        args["append"] = draw(APPENDS)
    if form == "source_path":
        args["source_path"] = draw(st.one_of(st.sampled_from(world.source_names), st.text()))
    maybe(draw, args, "expect_version", INT_ARGS)
    maybe(draw, args, "sources", uri_lists(world))
    maybe(draw, args, "confidence", CONFIDENCES)
    return mutate(draw, args, fields, hostile)


GET_MODES = st.sampled_from(["digest", "fields", "table", "full", "ref"])
MODES = st.one_of(st.sampled_from(["", "FULL", "all", "digest ", "fields"]), JSON_VALUES)
METADATA = ["kind", "author", "created", "updated", "size", "confidence", "sources", "seq"]
GOOD_FIELDS = st.lists(
    st.sampled_from([*METADATA, "columns", "rows", "links", "origin", "river", "otters", "body"]),
    min_size=1,
    max_size=4,
)
FIELDS = st.one_of(
    st.lists(st.text(max_size=6), max_size=4),
    st.just([f"f{i}" for i in range(33)]),
    JSON_VALUES,
)
BUDGETS = st.one_of(st.integers(100, 100_000), st.sampled_from([99, 100, 101, 150, 100_000]))


@st.composite
def get_arguments(draw: st.DrawFn, world: World) -> dict[str, Any]:
    fields = ["uris", "mode", "fields", "budget_tokens"]
    if draw(st.booleans()):
        args: dict[str, Any] = {
            "uris": draw(st.lists(readable_addresses(world), min_size=1, max_size=4))
        }
        maybe(draw, args, "mode", GET_MODES)
        if args.get("mode") == "fields" or draw(st.booleans()):
            args["fields"] = draw(GOOD_FIELDS)
        maybe(draw, args, "budget_tokens", BUDGETS)
        return mutate(draw, args, fields, JSON_VALUES)
    uris = draw(
        st.one_of(
            st.lists(addresses(world), max_size=4),
            addresses(world),
            st.just([world.pub_uris[0]] * 100),
            st.just([f"bb://{world.ws}/pub/k{i}" for i in range(101)]),
            st.just([world.pub_uris[0], f"bb://{world.other_ws}/pub/alpha"]),
            JSON_VALUES,
        )
    )
    args = {"uris": uris}
    maybe(draw, args, "mode", st.one_of(GET_MODES, MODES))
    maybe(draw, args, "fields", st.one_of(GOOD_FIELDS, FIELDS))
    maybe(draw, args, "budget_tokens", INT_ARGS)
    return mutate(draw, args, fields, JSON_VALUES)


@st.composite
def list_arguments(draw: st.DrawFn, world: World) -> dict[str, Any]:
    good: dict[str, st.SearchStrategy[Any]] = {
        "topic": st.sampled_from(["pub", "pub-notes", "pubx", "vault", "seq"]),
        "kind": st.sampled_from(["text", "table", "summary"]),
        "order": st.sampled_from(["recent", "name", "version"]),
        "limit": st.integers(1, 200),
        "mode": st.sampled_from(["digest", "table", "ref"]),
        "fields": GOOD_FIELDS,
        "budget_tokens": BUDGETS,
        "cursor": st.integers(0, 10_000),
        # A page position as list_keys writes it (``next``), for any order.
        "after": st.builds(
            lambda letter, score, path: f"{letter}{score}:{path}",
            st.sampled_from("rnvc"),
            st.integers(0, 10_000),
            st.sampled_from(["pub/alpha", "pub/zz", "vault/secret", "pub-notes/a/b"]),
        ),
    }
    bad: dict[str, st.SearchStrategy[Any]] = {
        "topic": st.one_of(name_values(world), JSON_VALUES),
        "kind": st.one_of(st.sampled_from(["", "TEXT", "note"]), JSON_VALUES),
        "order": st.one_of(st.sampled_from(["", "random", "Recent"]), SCALARS),
        "limit": INT_ARGS,
        "mode": st.one_of(st.sampled_from(["full", "fields"]), MODES),
        "fields": FIELDS,
        "budget_tokens": INT_ARGS,
        "cursor": INT_ARGS,
        "after": st.one_of(st.text(max_size=30), JSON_VALUES),
    }
    values = good if draw(st.booleans()) else bad
    args: dict[str, Any] = {}
    for name in good:
        if draw(st.integers(0, 2)) == 0:
            args[name] = draw(st.one_of(good[name], values[name]))
    return mutate(draw, args, list(good), JSON_VALUES)


def _split(*lines: str) -> list[str]:
    return [piece for line in lines for piece in line.split(" ")]


# RediSearch query syntax, and words its parser might treat specially.
QUERY_PIECES = st.sampled_from(
    [
        *_split(
            "ismissing * | - \" ' { } ( ) [ ] ~ % $ : ; \\ => @ _ __ a the NOT AND OR",
            "@topic:{vault} @ws:{*} @topic:{vault|pub} -otter otter|vault ~otter %otter%",
            "ismissing(@digest) @digest:* *ott* otter* w'otter' @__key:{x} $param 0x1F 1e5",
            "-1 INTERSECT \u0130s i\u0307 x\u0307 \u00df \u0394\u03b9 \u732b",
        ),
        '"otter plan"',
        "=>[KNN 10 @v $b]",
        "\x00",
        "\t\n",
    ]
)


@st.composite
def search_arguments(draw: st.DrawFn, world: World) -> dict[str, Any]:
    marks = world.marks
    shape = draw(st.sampled_from(["plain", "oracle", "anything"]))
    pieces = draw(st.lists(st.one_of(QUERY_PIECES, st.text(max_size=8)), max_size=8))
    if shape == "plain":
        return {"q": " ".join(pieces)}
    if shape == "oracle":
        # The note's own word amid syntax, searched for in the note's topic.
        pieces.insert(draw(st.integers(0, len(pieces))), world.oracle_word)
        return {"q": " ".join(pieces), "topic": "pub-notes"}
    if draw(st.booleans()):
        pieces.insert(draw(st.integers(0, len(pieces))), world.oracle_word)
    if draw(st.integers(0, 3)) == 3:
        pieces.append(marks["body"])  # search for the hidden note's own words
    q: Any = draw(st.sampled_from([" ", "", "\t"])).join(pieces)
    q = draw(
        mostly(
            st.just(q),
            st.one_of(
                sized(["otter ", "* ", "x"], [9_999, 10_000, 10_001]),
                st.text(max_size=40),
                JSON_VALUES,
            ),
        )
    )
    args: dict[str, Any] = {"q": q}
    maybe(draw, args, "topic", st.sampled_from(["pub", "pub-notes", "pub-notes", "vault"]))
    maybe(draw, args, "limit", mostly(st.integers(1, 50), INT_ARGS))
    hostile = st.one_of(JSON_VALUES, name_values(world))
    return mutate(draw, args, ["q", "topic", "limit"], hostile)


@st.composite
def link_arguments(draw: st.DrawFn, world: World) -> dict[str, Any]:
    hostile = st.one_of(JSON_VALUES, addresses(world))
    existing = [*world.pub_uris, f"bb://{world.ws}/pub-notes/two"]
    if draw(st.booleans()):
        src = draw(st.sampled_from(world.pub_uris[:4]))
        others = st.sampled_from([uri for uri in existing if uri != src])
        dst = draw(st.lists(others, min_size=1, max_size=3))
        if draw(st.integers(0, 3)) == 0:
            # A writer linking to a note it may not read: refused, whatever else it names.
            dst.insert(draw(st.integers(0, len(dst))), draw(hidden_addresses(world)))
        args: dict[str, Any] = {"src": src, "rel": draw(st.sampled_from(RELATIONS)), "dst": dst}
        return mutate(draw, args, ["src", "rel", "dst"], hostile)
    args = {
        "src": draw(addresses(world)),
        "rel": draw(st.one_of(st.sampled_from([*RELATIONS, "likes", "", "CITES"]), SCALARS)),
        "dst": draw(
            st.one_of(
                st.lists(addresses(world), max_size=3),
                addresses(world),
                st.just([world.pub_uris[1]] * 64),
                st.just([f"bb://{world.ws}/pub/k{i}" for i in range(65)]),
                JSON_VALUES,
            )
        ),
    }
    return mutate(draw, args, ["src", "rel", "dst"], hostile)


@functools.cache
def callers(world: World) -> st.SearchStrategy[Viewer]:
    # The narrow token most often: it is the one that can both write and be refused.
    return st.sampled_from([world.narrow, world.narrow, world.narrow, world.reader, world.outsider])


# --- the properties -----------------------------------------------------------------------------


@settings(PROFILE, max_examples=120)
@given(data=st.data())
def test_update_state_answers_in_shape_writes_only_what_it_acknowledges_and_leaks_nothing(
    world: World, data: st.DataObject
) -> None:
    viewer = data.draw(callers(world), label="caller")
    checked_call(world, viewer, "update_state", data.draw(update_arguments(world), label="args"))


@settings(PROFILE, max_examples=100)
@given(data=st.data())
def test_get_state_answers_every_address_once_and_never_shows_hidden_notes(
    world: World, data: st.DataObject
) -> None:
    viewer = data.draw(callers(world), label="caller")
    checked_call(world, viewer, "get_state", data.draw(get_arguments(world), label="args"))


@settings(PROFILE, max_examples=100)
@given(data=st.data())
def test_list_keys_lists_only_readable_topics_within_limit_whatever_the_arguments(
    world: World, data: st.DataObject
) -> None:
    viewer = data.draw(callers(world), label="caller")
    checked_call(world, viewer, "list_keys", data.draw(list_arguments(world), label="args"))


def _excluded_words(q: str) -> list[str]:
    """The words of the query's excluded terms (``-word``), as the README says they read."""
    return [
        w.lower() for term in re.findall(r"(?:^|\s)-(\S+)", q) for w in re.findall(r"\w+", term)
    ]


def _first_words(q: str, count: int) -> list[str]:
    words: dict[str, None] = {}
    for word in re.findall(r"\w+", q):
        words.setdefault(word.lower(), None)
        if len(words) == count:
            break
    return list(words)


@settings(PROFILE, max_examples=120)
@given(data=st.data())
def test_search_syntax_in_q_neither_fails_nor_leaks_nor_hides_a_matching_note(
    world: World, data: st.DataObject
) -> None:
    viewer = data.draw(callers(world), label="caller")
    args = data.draw(search_arguments(world), label="args")
    # The write properties may rewrite any note an admin can, the oracle among them: it holds
    # its word again before each search, so what the oracle asks is always true of the board.
    planted = world.redis.hget(_note_key(world.oracle_uri), FIELD.digest) or b""
    if world.oracle_word.encode() not in planted:
        oracle = {"digest": f"oracle note {world.oracle_word}", "body": "otter"}
        _plant(world, {"uri": world.oracle_uri, **oracle})
    oracle_text = b" ".join(
        v or b""
        for v in world.redis.hmget(
            _note_key(world.oracle_uri), [FIELD.digest, FIELD.body, FIELD.stext]
        )
    ).decode()
    is_error, body = checked_call(world, viewer, "search_keys", args)
    q, limit = args.get("q"), args.get("limit")
    oracle_applies = (
        isinstance(q, str)
        and len(q) <= 10_000
        and world.oracle_word in _first_words(q, 32)
        # A word the query excludes (``-otter``) that the note holds leaves it out, as asked.
        and not set(_excluded_words(q)) & set(_first_words(oracle_text, 1_000))
        # A quote asks for a phrase (one left open runs to the end of q: '" oracle-word
        # missing' wants those two words in that order), which the note need not hold.
        and not any(mark in q for mark in '"“”')
        and args.get("topic") == "pub-notes"
        and viewer.can_read(world.ws, "pub-notes")
        and (limit is None or (_is_int(limit) and 2 <= limit <= 50))
        and set(args) <= {"q", "topic", "limit"}
    )
    if oracle_applies:
        event("the oracle note had to be found")
        # Whatever syntax surrounds it, a word of the note's digest finds the note: the
        # caller's text can only add words, and exclude none the note holds.
        assert not is_error, body
        assert world.oracle_uri in [i["uri"] for i in body["items"]], body


@settings(PROFILE, max_examples=100)
@given(data=st.data())
def test_link_state_links_only_what_it_reports_and_only_readable_targets(
    world: World, data: st.DataObject
) -> None:
    viewer = data.draw(callers(world), label="caller")
    checked_call(world, viewer, "link_state", data.draw(link_arguments(world), label="args"))


@settings(PROFILE, max_examples=150)
@given(data=st.data())
def test_a_writers_well_formed_writes_succeed_and_cite_only_what_it_may_read(
    world: World, data: st.DataObject
) -> None:
    # The hostile properties above refuse most writes; this one holds the writes that must
    # succeed to succeed (the version read back, the feed, the shape), so that acknowledged
    # writes, not refusals, are most of what it checks.
    viewer = world.narrow
    uri = data.draw(writable_addresses(world), label="uri")
    stored = world.redis.hmget(_note_key(uri), [FIELD.version, FIELD.kind])
    current = int(stored[0] or 0)
    args: dict[str, Any] = {"uri": uri, "digest": data.draw(GOOD_TEXT, label="digest")}
    # Every value is drawn whatever the note holds, and only then chosen from: draws that
    # depended on the board's state (which earlier examples change) made Hypothesis see a
    # different test for the same choices and fail as flaky.
    form = data.draw(st.sampled_from(["body", "body", "table", "append"]), label="form")
    body_text = data.draw(GOOD_BODIES, label="body")
    table = data.draw(good_table(), label="table")
    appended = data.draw(GOOD_TEXT, label="append")
    if form == "append" and stored[1] == b"table":
        form = "body"  # append extends text notes only
    if form == "body":
        args["body"] = body_text
    elif form == "table":
        args["columns"], args["rows"] = table
    else:
        args["append"] = appended
    # Hypothesis leans towards the first of a list and the low end of a range: the common
    # case goes there, the refusals later.
    expect = data.draw(st.sampled_from(["current", "stale", "none", "current", "current"]))
    offset = data.draw(st.sampled_from([-1, 1, 5]), label="stale by")
    if form != "append" and expect == "current":
        args["expect_version"] = current
    elif form != "append" and expect == "stale":
        args["expect_version"] = current + offset if current + offset >= 0 else current + 1
    sources = data.draw(st.lists(readable_addresses(world), max_size=2), label="sources")
    if data.draw(st.integers(0, 5), label="hidden source") == 5:
        sources.append(data.draw(hidden_addresses(world)))
    if sources:
        args["sources"] = sources
    # A source must exist, as a link's target must (looked at before the call).
    missing = [s for s in sources if not world.redis.exists(_note_key(s))]
    is_error, body = checked_call(world, viewer, "update_state", args)
    if any(not viewer.can_read(*_address_of(s)) for s in sources):
        assert is_error and body["error"]["code"] == "forbidden", body
        event("refused: a hidden source")
    elif missing:
        assert is_error and body["error"]["code"] == "not_found", body
        assert body["error"]["uris"] and set(body["error"]["uris"]) <= set(missing), body
        event("refused: a missing source")
    elif "expect_version" in args and args["expect_version"] != current:
        assert is_error and body["error"]["code"] == "conflict", body
        assert body["error"]["current_version"] == current, body
        event("refused: a stale expect_version")
    else:
        assert not is_error, body
        assert body["version"] == current + 1, body
        event("written")


ALL_ARGUMENT_NAMES = _split(
    "uri digest body source_path columns rows append expect_version sources confidence uris mode",
    "fields budget_tokens topic kind order limit cursor after q src rel dst",
)


@settings(PROFILE, max_examples=80)
@given(data=st.data())
def test_any_tool_name_with_any_json_arguments_gets_a_structured_answer(
    world: World, data: st.DataObject
) -> None:
    viewer = data.draw(callers(world), label="caller")
    tool = data.draw(
        st.one_of(
            st.sampled_from([*SHAPES, "Update_State", "get_state ", "", "tools/list"]),
            st.text(max_size=12),
        ),
        label="tool",
    )
    arguments = data.draw(
        mostly(
            st.dictionaries(
                st.one_of(st.sampled_from(ALL_ARGUMENT_NAMES), UNKNOWN_NAMES),
                st.one_of(JSON_VALUES, addresses(world)),
                max_size=5,
            ),
            # arguments that are not an object at all
            st.one_of(st.booleans(), st.integers(), st.text(max_size=5), st.lists(SCALARS)),
        ),
        label="args",
    )
    checked_call(world, viewer, tool, arguments)


# --- tokens -------------------------------------------------------------------------------------


def _claims(world: World, **overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": "blackboard-mcp",
        "aud": "blackboard-mcp",
        "sub": world.claims_subject,
        "ws": world.ws,
        "read": ["pub"],
        "write": ["pub"],
        "caps": ["board_read", "board_write"],
        "secrets": [],
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        "jti": uuid.uuid4().hex,
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not _MISSING}


_MISSING = object()
# Topic patterns a token might carry. Which of them reach "vault" or "pubx" is decided by the
# reference matcher above, never by the product's own.
PATTERNS = [
    *_split("pub pub-* p*b **pub [v]ault VAULT vaul ault v?ult vault/.. pub|vault .* pub* %"),
    "../vault",
    "vault ",
    "",
]


@st.composite
def hostile_tokens(draw: st.DrawFn, world: World) -> tuple[Viewer, Viewer | None]:
    """(what to send, the rights it must be held to if accepted; None: must be refused)."""
    narrow_token = str(world.narrow.header).removeprefix("Bearer ")
    kind = draw(
        st.sampled_from(
            [
                "valid",
                "garbage",
                "truncated",
                "flipped",
                "wrong_secret",
                "alg_none",
                "expired",
                "not_yet",
                "wrong_audience",
                "scheme",
                "none",
                "long",
                *["claims"] * 4,  # the richest kind: signed, so only its scopes stand between
            ]
        )
    )
    if kind == "valid":
        viewer = draw(st.sampled_from([world.narrow, world.reader, world.outsider]))
        return viewer, viewer
    if kind == "garbage":
        header = "Bearer " + draw(st.text(PRINTABLE, max_size=60))
    elif kind == "truncated":
        header = "Bearer " + narrow_token[: draw(st.integers(0, len(narrow_token) - 1))]
    elif kind == "flipped":
        at = draw(st.integers(0, len(narrow_token) - 1))
        char = draw(st.sampled_from("AbZ09-_.x"))
        flipped = narrow_token[:at] + char + narrow_token[at + 1 :]
        # Re-encoding the last base64 character can leave the signature's bytes as they were,
        # so a flipped token may be the same token: it keeps exactly the narrow rights.
        return Viewer("flipped", "Bearer " + flipped, None), world.narrow
    elif kind == "wrong_secret":
        header = _bearer(jwt.encode(_claims(world), "not-the-secret-" + "z" * 40))
    elif kind == "alg_none":
        header = _bearer(jwt.encode(_claims(world, read=["*"]), "", algorithm="none"))
    elif kind == "expired":
        past = int(time.time()) - 3600
        header = _bearer(
            jwt.encode(_claims(world, iat=past - 600, nbf=past - 600, exp=past), TEST_JWT_SECRET)
        )
    elif kind == "not_yet":
        future = int(time.time()) + 3600
        header = _bearer(jwt.encode(_claims(world, nbf=future, iat=future), TEST_JWT_SECRET))
    elif kind == "wrong_audience":
        field_name = draw(st.sampled_from(["aud", "iss"]))
        header = _bearer(jwt.encode(_claims(world, **{field_name: "elsewhere"}), TEST_JWT_SECRET))
    elif kind == "scheme":
        template = draw(
            st.sampled_from(
                [
                    "bearer {t}",
                    "Bearer  {t}  ",
                    "Basic {t}",
                    "{t}",
                    "Bearer",
                    "Bearer {t}, Bearer {t}",
                ]
            )
        )
        return Viewer("scheme", template.format(t=narrow_token), None), world.narrow
    elif kind == "none":
        return Viewer("none", None, None), None
    elif kind == "long":
        header = "Bearer " + narrow_token + "A" * draw(st.sampled_from([8192, 100_000]))
    else:
        return draw(signed_claims(world))
    return Viewer(kind, header, None), None


@st.composite
def signed_claims(draw: st.DrawFn, world: World) -> tuple[Viewer, Viewer | None]:
    """Correctly signed tokens whose claims are odd: the gateway must hold them to their word."""
    ws = draw(
        st.one_of(
            st.sampled_from(
                [
                    world.ws,
                    world.ws,
                    world.other_ws,
                    world.ws.upper(),
                    world.ws + "}",
                    "{" + world.ws,
                    world.ws + ":vault",
                    world.ws + "/vault",
                    "*",
                    "",
                ]
            ),
            st.sampled_from([5, None, [world.ws], _MISSING]),
        )
    )
    patterns = st.lists(st.sampled_from(PATTERNS), max_size=3)
    read = draw(st.one_of(patterns, st.sampled_from(["*", "pub", None, [5], _MISSING])))
    write = draw(st.one_of(patterns, st.sampled_from(["pub", [None], _MISSING])))
    caps = draw(
        st.one_of(
            st.lists(
                st.sampled_from(["board_read", "board_write", "file_read", "BOARD_READ", ""]),
                max_size=3,
            ),
            st.sampled_from(["board_read", None, _MISSING]),
        )
    )
    broken: list[dict[str, Any]] = [
        {"sub": _MISSING},
        {"jti": _MISSING},
        {"exp": _MISSING},
        {"iat": "now"},
    ]
    extra = draw(st.sampled_from([{}, {}, {}, {}, *broken]))
    claims = _claims(world, ws=ws, read=read, write=write, caps=caps, **extra)
    header = _bearer(jwt.encode(claims, TEST_JWT_SECRET))

    def strings(value: Any) -> tuple[str, ...]:
        is_list = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return tuple(value) if is_list else ()

    rights = Viewer(
        "claims",
        header,
        ws if isinstance(ws, str) else None,
        strings(read),
        strings(write),
        frozenset(strings(caps)),
    )
    return rights, rights


@functools.cache
def token_menu(world: World) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    ws = world.ws
    marks = world.marks
    return st.sampled_from(
        [
            ("get_state", {"uris": [world.secret_uri], "mode": "full"}),
            ("get_state", {"uris": [world.pub_uris[0], world.pub_uris[1]], "mode": "full"}),
            ("get_state", {"uris": [f"bb://{world.other_ws}/pub/alpha"], "mode": "full"}),
            ("list_keys", {}),
            ("list_keys", {"topic": "vault", "mode": "table", "fields": ["author"]}),
            ("list_keys", {"topic": "pub", "mode": "table"}),
            ("search_keys", {"q": f"otter plan {marks['body']}"}),
            ("search_keys", {"q": "otter", "topic": "vault"}),
            ("update_state", {"uri": f"bb://{ws}/pub/by-token", "digest": "d", "body": "b"}),
            ("update_state", {"uri": world.secret_uri, "digest": "overwritten", "body": "b"}),
            (
                "update_state",
                {"uri": f"bb://{ws}/vault/new", "digest": "d", "body": "", "expect_version": 0},
            ),
            ("link_state", {"src": world.pub_uris[0], "rel": "cites", "dst": [world.secret_uri]}),
            ("link_state", {"src": world.secret_uri, "rel": "cites", "dst": [world.pub_uris[2]]}),
        ]
    )


@settings(PROFILE, max_examples=120)
@given(data=st.data())
def test_a_token_is_refused_with_401_or_held_to_exactly_its_own_scopes(
    world: World, data: st.DataObject
) -> None:
    sent_as, rights = data.draw(hostile_tokens(world), label="token")
    tool, arguments = data.draw(token_menu(world), label="call")
    sent = request_text(tool, arguments)
    before = world.snapshot()
    reply = world.call(sent_as, tool, arguments)
    after = world.snapshot()
    event(f"{sent_as.label} {tool}: {reply.status}")
    if reply.status == 401:
        unauthenticated_answer(reply)
        assert before == after
        return
    assert rights is not None, f"{sent_as.label} token was accepted: {reply.text[:500]}"
    is_error, _ = tool_answer(reply)
    assert_nothing_hidden(world, rights, sent, reply)
    assert_only_acknowledged_writes(rights, tool, not is_error, before, after)


# --- addresses ----------------------------------------------------------------------------------


def follows_grammar(uri: str) -> bool:
    """The address grammar as the store enforces it (see SEGMENT above)."""
    if len(uri) > 512 or not uri.startswith("bb://"):
        return False
    parts = uri.removeprefix("bb://").split("/")
    if len(parts) < 3 or len(parts) - 2 > 16:
        return False
    workspace, topic, *segments = parts
    return (
        NAME.fullmatch(workspace) is not None
        and NAME.fullmatch(topic) is not None
        and all(SEGMENT.fullmatch(s) is not None for s in segments)
    )


@settings(PROFILE, max_examples=100)
@given(data=st.data())
def test_an_address_is_accepted_exactly_when_it_follows_the_address_grammar(
    world: World, data: st.DataObject
) -> None:
    scratch = str(world.scratch.workspace)
    uri = data.draw(
        st.one_of(
            hostile_addresses(world).map(functools.partial(_retarget, world.ws, scratch)),
            st.builds(
                functools.partial(_join_address, "bb://", scratch),
                mostly(VALID_TOPICS, name_values(world)),
                st.lists(mostly(VALID_SEGMENTS, SEGMENTS), min_size=1, max_size=17),
            ),
        ),
        label="uri",
    )
    tool = data.draw(st.sampled_from(["update_state", "get_state"]), label="tool")
    arguments: dict[str, Any] = (
        {"uri": uri, "digest": "grammar probe", "body": "b"}
        if tool == "update_state"
        else {"uris": [uri]}
    )
    is_error, body = checked_call(world, world.scratch, tool, arguments)
    if not follows_grammar(uri):
        assert is_error and body["error"]["code"] == "invalid_argument", body
    elif _address_of(uri)[0] != scratch:
        assert is_error and body["error"]["code"] == "forbidden", body
    else:
        assert not is_error, body
        if tool == "get_state":
            assert [i["uri"] for i in body["items"]] == [uri], body


# --- a sequence of writes against a model -------------------------------------------------------


@dataclass
class ModelNote:
    version: int = 0
    digest: str = ""
    kind: str = "text"
    content: str = ""


CONTENTS = ["", "short body", "x" * 12_000, "y" * 12_000, "\u00fcn\u00ef \u2713 \\t"]
TABLES: list[tuple[list[str], list[list[str]]]] = [
    (["a", "b"], [["1", "2"], ["3", ""]]),
    (["k"], [["w" * 3_000]] * 4),  # over 10 KB as TSV: stored outside the note
]
CHUNKS = ["+", "z" * 6_000]
OPS = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.sampled_from(["cas", "stale", "create", "blind", "table", "append", "link"]),
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=12,
)


def _tsv(columns: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["\t".join(columns), *("\t".join(row) for row in rows)])


def _expected_refusal(op: str, note: ModelNote) -> str | None:
    if op == "append" and note.version and note.kind == "table":
        return "invalid_argument"
    if op == "stale" or (op == "create" and note.version):
        return "conflict"
    return None


def _apply(op: str, args: dict[str, Any], note: ModelNote) -> None:
    existed = note.version > 0
    note.version += 1
    note.digest = args["digest"]
    if op == "append":  # extends the latest content, or starts a text note
        note.content = (note.content if existed else "") + args["append"]
        note.kind = note.kind if existed else "text"
    elif op == "table":
        note.kind, note.content = "table", _tsv(args["columns"], args["rows"])
    else:
        note.kind, note.content = "text", args["body"]


def _blob_references_are_exact(client: redis.Redis[bytes], workspace: str) -> None:
    """Offloaded content is counted once per note and once per kept past version that holds
    it, and kept while counted."""
    notes = list(client.scan_iter(match=f"bbn:{{{workspace}}}:*", count=5000))
    notes += list(client.scan_iter(match=f"bbh:{{{workspace}}}:*", count=5000))
    held: dict[str, int] = {}
    for name in notes:
        blob = (client.hget(name, FIELD.blob) or b"").decode()
        if blob:
            held[blob] = held.get(blob, 0) + 1
    refs = {k.decode(): int(v) for k, v in client.hgetall(f"bbr:{{{workspace}}}").items()}
    stored = {
        k.decode().rsplit(":", 1)[1]
        for k in client.scan_iter(match=f"bbb:{{{workspace}}}:*", count=5000)
    }
    assert refs == held, (refs, held)
    assert stored == set(held), (stored, held)


@settings(PROFILE, max_examples=30)
@given(ops=OPS)
def test_acknowledged_writes_with_expect_version_match_a_model_and_the_change_feed(
    world: World, ops: list[tuple[int, str, int]]
) -> None:
    admin = world.scratch
    prefix = f"bb://{admin.workspace}/seq/{uuid.uuid4().hex[:12]}/k"
    uris = [f"{prefix}{i}" for i in range(3)]
    model = [ModelNote() for _ in uris]
    _, start = tool_answer(world.call(admin, "list_keys", {"topic": "seq", "limit": 1}))
    for step, (k, op, pick) in enumerate(ops):
        note = model[k]
        if op == "link":
            j = (k + 1 + pick % 2) % 3
            args: dict[str, Any] = {"src": uris[k], "rel": RELATIONS[pick], "dst": [uris[j]]}
            is_error, body = checked_call(world, admin, "link_state", args)
            if note.version and model[j].version:
                assert not is_error, body
            else:
                assert is_error and body["error"]["code"] == "not_found", body
            continue
        args = {"uri": uris[k], "digest": f"step {step}"}
        if op == "append":
            args["append"] = CHUNKS[pick % 2]
        elif op == "table":
            args["columns"], args["rows"] = TABLES[pick % 2]
        else:
            args["body"] = CONTENTS[pick]
        if op in ("cas", "table"):
            args["expect_version"] = note.version
        elif op == "stale":
            args["expect_version"] = note.version + 1 + pick
        elif op == "create":
            args["expect_version"] = 0
        is_error, body = checked_call(world, admin, "update_state", args)
        refusal = _expected_refusal(op, note)
        if refusal is None:
            assert not is_error, (op, body)
            _apply(op, args, note)
            assert body["version"] == note.version, (op, body)
        else:
            assert is_error and body["error"]["code"] == refusal, (op, body)
            if refusal == "conflict":
                assert body["error"]["current_version"] == note.version, body
                assert body["error"]["current_digest"] == note.digest, body

    _, read = tool_answer(
        world.call(admin, "get_state", {"uris": uris, "mode": "full", "budget_tokens": 100_000})
    )
    assert not read["truncated"], read
    for uri, note, item in zip(uris, model, read["items"], strict=True):
        assert item["uri"] == uri
        if not note.version:
            assert item == {"uri": uri, "error": "not_found"}, item
            continue
        assert (item["version"], item["digest"], item["kind"]) == (
            note.version,
            note.digest,
            note.kind,
        ), item
        content = _tsv(item["columns"], item["rows"]) if note.kind == "table" else item["body"]
        assert content == note.content, item
    # The change feed since the start names exactly the notes an acknowledged write touched.
    _, feed = tool_answer(
        world.call(admin, "list_keys", {"topic": "seq", "cursor": start["cursor"], "limit": 200})
    )
    assert {i["uri"] for i in feed["items"]} == {
        u for u, n in zip(uris, model, strict=True) if n.version
    }
    _blob_references_are_exact(world.redis, str(admin.workspace))
