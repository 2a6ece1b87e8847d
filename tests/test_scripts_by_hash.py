"""Scripts go to Redis by hash; a Redis that lacks them (restarted, failed over, its cache
flushed) still runs every call once and whole (store/connection/_scripts.py).

A script answered NOSCRIPT did not run. Outside MULTI it is loaded and sent again; inside, it
goes by hash only when it is the MULTI's one command, so that nothing of the EXEC ran. These
tests flush Redis's scripts at the worst moments: before a call, and between a write's reads
under WATCH and its EXEC.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, ClassVar

import redis
from store_support import raw, uri

from blackboard_mcp.auth import Grant
from blackboard_mcp.store import Board, GetState, LinkState, ListKeys, SearchKeys, UpdateState
from blackboard_mcp.store import board_client as make_board_client
from blackboard_mcp.store.access._admission import Admission, RedisCallAdmission
from blackboard_mcp.store.access._ratelimit import RedisRateLimiter
from blackboard_mcp.store.connection import _key_names as keys
from blackboard_mcp.store.connection._field_names import FIELD
from blackboard_mcp.store.connection._tx import Transaction
from blackboard_mcp.store.connection._wire import WireConnection

_SCRIPT_WORDS = b"redis.call"  # every script's text holds it; no hash or argument does


class _Wire(WireConnection):
    """Records what it sends; flushes Redis's scripts before the packets ``flush_before``
    picks (each flush once), as an operator's SCRIPT FLUSH or a failover could."""

    sent: ClassVar[list[bytes]] = []
    flushes: ClassVar[list[bytes]] = []  # a packet's opening: flush before the next such one
    url: ClassVar[str] = ""

    async def round_trip(self, packed: bytes, count: int) -> list[Any]:
        for opening in _Wire.flushes:
            if packed.upper().startswith(opening):
                _Wire.flushes.remove(opening)
                client = redis.Redis.from_url(_Wire.url)
                client.script_flush()
                client.close()
                break
        _Wire.sent.append(packed)
        return await super().round_trip(packed, count)


_MULTI = b"*1\r\n$5\r\nMULTI\r\n"
_WATCH = b"*2\r\n$5\r\nWATCH\r\n"


def _recording_board(url: str) -> Board:
    _Wire.sent.clear()
    _Wire.flushes.clear()
    _Wire.url = url
    return Board(client=make_board_client(url, wire_class=_Wire))


# Every call of these tests is made with this token.
TOKEN = Grant("a", "ws", ("*",), ("*",), frozenset(), frozenset(), "tk", time.time(), 1e12)


def _admission(board: Board) -> tuple[RedisRateLimiter, RedisCallAdmission]:
    """The gateway's admission on ``board``, counting calls against a rate window."""
    limiter = RedisRateLimiter(client=board.redis.routed, per_minute=1000)
    return limiter, RedisCallAdmission(redis=board.redis, limiter=limiter)


def _flush_scripts(url: str) -> None:
    client = raw(url)
    client.script_flush()
    client.close()


def _write(path: str, body: str, **more: Any) -> UpdateState:
    return UpdateState.parse({"uri": uri(path), "digest": f"d {body[:20]}", "body": body, **more})


async def test_a_write_to_a_redis_with_its_scripts_sends_no_script_text(redis_url: str) -> None:
    board = _recording_board(redis_url)
    try:
        await board.start()
        first = await board.update_state(_write("n", "one"), author="a")
        _Wire.sent.clear()
        await board.update_state(_write("n", "two", expect_version=first["version"]), author="a")
        # Two round trips: WATCH and the reads; MULTI, the write's one script by hash, EXEC.
        assert len(_Wire.sent) == 2, _Wire.sent
        assert not any(_SCRIPT_WORDS in packed for packed in _Wire.sent)
        assert _Wire.sent[1].startswith(_MULTI)
        assert _Wire.sent[1].count(b"EVALSHA") == 1
        assert len(_Wire.sent[1]) < 1500, len(_Wire.sent[1])
    finally:
        await board.close()


async def test_every_call_runs_once_and_whole_on_a_redis_that_lost_its_scripts(
    redis_url: str,
) -> None:
    board = _recording_board(redis_url)
    limiter, admission = _admission(board)
    verdicts: list[Admission] = []
    try:
        await board.start()
        written = await board.update_state(_write("n", "first words"), author="a")
        calls: dict[str, Any] = {
            "a CAS rewrite": lambda: board.update_state(
                _write("n", "second words", expect_version=written["version"]), author="a"
            ),
            "a gated write": lambda: board.update_state(
                _write("g", "gated words"),
                author="a",
                gate=admission.gate(TOKEN, verdicts.append),
            ),
            "an append": lambda: board.update_state(
                UpdateState.parse({"uri": uri("log"), "digest": "log", "append": "line "}),
                author="a",
            ),
            "a link": lambda: board.link_state(
                LinkState.parse({"src": uri("g"), "rel": "cites", "dst": uri("n")}), author="a"
            ),
            "the admission": lambda: admission.admit(TOKEN),
            "get_state": lambda: board.get_state(GetState.parse({"uris": [uri("n")]})),
            "list_keys by version": lambda: board.list_keys(
                ListKeys.parse({"topic": "t", "order": "version"}), workspace="ws"
            ),
            "search_keys": lambda: board.search_keys(
                SearchKeys.parse({"q": "second"}), workspace="ws"
            ),
        }
        answers = {}
        for name, call in calls.items():
            _flush_scripts(redis_url)
            answers[name] = await call()
        assert answers["a CAS rewrite"]["version"] == 2
        assert answers["a gated write"]["version"] == 1
        assert answers["an append"]["version"] == 1
        assert answers["get_state"]["items"][0]["digest"] == "d second words"
        assert answers["search_keys"]["items"][0]["uri"] == uri("n")
        listed = [i["uri"] for i in answers["list_keys by version"]["items"]]
        assert sorted(listed) == sorted([uri("n"), uri("g"), uri("log")])
        # The gated write and the admission each counted once in the rate window, and the
        # gate was judged once.
        assert len(verdicts) == 1
        client = raw(redis_url)
        try:
            window = limiter.window_key("ws", "a")
            assert int(client.get(window) or 0) == 2
            assert client.hget(keys.note("ws", "t/log"), FIELD.body) == b"line "
            assert client.xlen(keys.changelog("ws")) == 5  # n twice, g, log, the link
        finally:
            client.close()
    finally:
        await board.close()


async def test_scripts_flushed_between_a_writes_reads_and_its_exec_leave_no_half_write(
    redis_url: str,
) -> None:
    board = _recording_board(redis_url)
    # Bodies past the offload size live in blobs, whose reference counts a half write would
    # leave wrong.
    old_body, new_body = "old " * 20_000, "new " * 20_000
    try:
        await board.start()
        first = await board.update_state(_write("n", old_body), author="a")
        _Wire.flushes.append(_MULTI)
        second = await board.update_state(
            _write("n", new_body, expect_version=first["version"]), author="a"
        )
        assert not _Wire.flushes  # the flush came between the reads and the EXEC
        assert second["version"] == 2
        client = raw(redis_url)
        try:
            note = keys.note("ws", "t/n")
            assert client.hget(note, FIELD.version) == b"2"
            assert client.zrange(keys.versions("ws", "t/n"), 0, -1) == [b"1"]
            assert client.zrange(keys.version_times("ws"), 0, -1) == [b"t/n@1"]
            refs = {k: int(v) for k, v in client.hgetall(keys.blob_refs("ws")).items()}
            assert sorted(refs.values()) == [1, 1], refs  # the kept version's, the note's
            assert client.zscore(keys.by_version("ws", "t"), "n") == 2
            assert client.get(keys.sequence("ws")) == b"2"
            assert client.xlen(keys.changelog("ws")) == 2
            blob = client.hget(note, FIELD.blob)
            assert blob == hashlib.sha256(new_body.encode()).hexdigest().encode()
            assert client.get(keys.blob("ws", blob.decode())) == new_body.encode()
        finally:
            client.close()
    finally:
        await board.close()


async def test_a_multi_of_several_commands_runs_them_once_when_its_scripts_were_flushed(
    redis_url: str,
) -> None:
    # A MULTI that holds a script beside other commands sends the script as text: a script
    # by hash there would fail alone, and running the transaction again would apply the
    # other commands twice.
    board = _recording_board(redis_url)
    counter = "bbtest:{ws}:counter"

    async def body(tx: Transaction, _first: list[Any]) -> Any:
        tx.multi()
        tx.queue("INCR", counter)
        tx.queue("EVAL", "return redis.call('GET', KEYS[1])", 1, counter)
        return lambda replies: replies

    try:
        await board.start()
        client = await board.redis.home("ws")
        _Wire.flushes.append(_MULTI)
        replies = await client.transaction([counter], body, max_retries=3)
        assert not _Wire.flushes
        assert replies == [1, b"1"]
        check = raw(redis_url)
        try:
            assert check.get(counter) == b"1"
        finally:
            check.close()
    finally:
        await board.close()


async def test_a_gate_whose_script_was_flushed_with_the_reads_is_judged_once(
    redis_url: str,
) -> None:
    board = _recording_board(redis_url)
    limiter, admission = _admission(board)
    verdicts: list[Admission] = []
    try:
        await board.start()
        await board.update_state(_write("n", "warm the scripts"), author="a")
        _Wire.flushes.append(_WATCH)
        written = await board.update_state(
            _write("g", "gated"), author="a", gate=admission.gate(TOKEN, verdicts.append)
        )
        assert not _Wire.flushes
        assert written["version"] == 1
        assert len(verdicts) == 1
        client = raw(redis_url)
        try:
            assert int(client.get(limiter.window_key("ws", "a")) or 0) == 1
        finally:
            client.close()
    finally:
        await board.close()


async def test_a_write_whose_scripts_keep_vanishing_runs_again_once_with_its_text(
    redis_url: str,
) -> None:
    # Scripts flushed before every EXEC (an operator's loop of SCRIPT FLUSH): the write must
    # not chase them, but run again once, with the script's text, which cannot be missing.
    board = _recording_board(redis_url)
    try:
        await board.start()
        first = await board.update_state(_write("n", "first 第一 🚀"), author="a")
        _Wire.flushes.extend([_MULTI, _MULTI, _MULTI])
        second = await board.update_state(
            _write("n", "second 第二 🚀", expect_version=first["version"]), author="a"
        )
        assert second["version"] == 2
        assert len(_Wire.flushes) == 1  # two EXECs, not three or more
        execs = [packed for packed in _Wire.sent if packed.startswith(_MULTI)]
        assert execs[-1].count(b"EVALSHA") == 0 and _SCRIPT_WORDS in execs[-1]
        read = await board.get_state(GetState.parse({"uris": [uri("n")], "mode": "full"}))
        assert read["items"][0]["body"] == "second 第二 🚀"
    finally:
        await board.close()
