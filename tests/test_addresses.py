"""Addresses are parsed strictly: every malformed one is refused, naming the argument."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blackboard_mcp.store import (
    CATCH_UP_PATH,
    Address,
    InvalidArgument,
    catch_up_address,
    is_valid_name,
    parse_address,
)
from blackboard_mcp.store.notes._addresses import MAX_DEPTH, checked_address

VALID = [
    ("bb://ws/topic/key", Address("ws", "topic", "key")),
    ("bb://ws/topic/a/b/c", Address("ws", "topic", "a/b/c")),
    ("bb://my-ws.1/t_2/Key.With-MIXED_case~1", Address("my-ws.1", "t_2", "Key.With-MIXED_case~1")),
    ("bb://0/9/x", Address("0", "9", "x")),
    ("bb://ws/run/state/current", Address("ws", "run", "state/current")),
    ("bb://ws/t/x..y", Address("ws", "t", "x..y")),
    ("bb://ws/t/" + "/".join("s" * 16), Address("ws", "t", "/".join("s" * 16))),
    ("bb://" + "w" * 64 + "/t/k", Address("w" * 64, "t", "k")),
    ("bb://ws/t/" + "k" * 128, Address("ws", "t", "k" * 128)),
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=[v[0][:40] for v in VALID])
def test_valid_address_parses_to_its_parts(text: str, expected: Address) -> None:
    parsed = parse_address(text)
    assert parsed == expected
    assert parsed.uri == text
    assert str(parsed) == text
    assert parsed.member == f"{expected.topic}/{expected.path}"


INVALID: list[tuple[str, object]] = [
    ("empty string", ""),
    ("wrong scheme", "http://ws/t/k"),
    ("no scheme", "ws/t/k"),
    ("upper-case scheme", "BB://ws/t/k"),
    ("missing key", "bb://ws/t"),
    ("missing key with slash", "bb://ws/t/"),
    ("only workspace", "bb://ws"),
    ("empty workspace", "bb:///t/k"),
    ("empty topic", "bb://ws//k"),
    ("empty middle segment", "bb://ws/t/a//b"),
    ("trailing slash", "bb://ws/t/a/"),
    ("dot segment", "bb://ws/t/./k"),
    ("dot-dot segment", "bb://ws/t/../k"),
    ("dot-dot as key", "bb://ws/t/.."),
    ("dot as key", "bb://ws/t/."),
    ("segment starting with a dot", "bb://ws/t/..x"),
    ("upper-case workspace", "bb://WS/t/k"),
    ("upper-case topic", "bb://ws/Topic/k"),
    ("workspace starting with dash", "bb://-ws/t/k"),
    ("topic starting with dot", "bb://ws/.t/k"),
    ("space in key", "bb://ws/t/a b"),
    ("colon in key", "bb://ws/t/a:b"),
    ("braces in key", "bb://ws/t/{a}"),
    ("star in key", "bb://ws/t/*"),
    ("percent in key", "bb://ws/t/a%20b"),
    ("non-ascii key", "bb://ws/t/caf\u00e9"),
    ("non-ascii topic", "bb://ws/t\u00f6pic/k"),
    ("query string", "bb://ws/t/k?x=1"),
    ("fragment", "bb://ws/t/k#x"),
    ("backslash", "bb://ws/t/a\\b"),
    ("newline", "bb://ws/t/k\n"),
    ("key segment too long", "bb://ws/t/" + "k" * 129),
    ("workspace too long", "bb://" + "w" * 65 + "/t/k"),
    ("whole uri too long", "bb://ws/t/" + "/".join(["k" * 100] * 6)),
    ("too deep", "bb://ws/t/" + "/".join("s" * 17)),
    ("None", None),
    ("bytes", b"bb://ws/t/k"),
    ("int", 42),
    ("list", ["bb://ws/t/k"]),
]


@pytest.mark.parametrize(("case", "value"), INVALID, ids=[c for c, _ in INVALID])
def test_invalid_address_is_refused_naming_the_argument(case: str, value: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_address(value, argument="src")
    # Workspace and topic faults name the part; everything else names the argument itself.
    assert info.value.details["argument"] in ("src", "workspace", "topic")
    assert info.value.code == "invalid_argument"


def test_upper_case_workspace_is_reported_as_a_workspace_fault() -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_address("bb://Team/t/k")
    assert info.value.details["argument"] == "workspace"


def test_upper_case_topic_is_reported_as_a_topic_fault() -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_address("bb://team/Plans/k")
    assert info.value.details["argument"] == "topic"


def test_too_long_uri_message_gives_the_limit() -> None:
    with pytest.raises(InvalidArgument, match="limit is 512"):
        parse_address("bb://ws/t/" + "/".join(["k" * 100] * 6))


def test_sixteen_segments_is_the_deepest_accepted() -> None:
    assert parse_address("bb://ws/t/" + "/".join("s" * 16)).path.count("/") == 15
    with pytest.raises(InvalidArgument, match="more than 16"):
        parse_address("bb://ws/t/" + "/".join("s" * 17))


def test_catch_up_address_is_run_state_current_of_the_workspace() -> None:
    address = catch_up_address("team-a")
    assert address == Address("team-a", "run", "state/current")
    assert address.uri == "bb://team-a/run/state/current"
    assert address.uri.endswith(CATCH_UP_PATH)
    assert parse_address(address.uri) == address


@pytest.mark.parametrize("bad", ["", "Team", "a/b", "-a", 7, None])
def test_catch_up_address_refuses_a_bad_workspace(bad: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        catch_up_address(bad)  # type: ignore[arg-type]
    assert info.value.details["argument"] == "workspace"


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a", True),
        ("a.b-c_d", True),
        ("0abc", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("", False),
        ("A", False),
        ("_a", False),
        ("a b", False),
        ("a/b", False),
        ("\u00e9", False),
    ],
)
def test_is_valid_name(name: str, ok: bool) -> None:
    assert is_valid_name(name) is ok


def test_remembered_addresses_answer_as_parsing_them_would() -> None:
    # Valid addresses are remembered (store/notes/_addresses.py), under a bound: thousands of
    # distinct ones later, each still parses to its parts, and a malformed neighbour of a
    # remembered one is still refused with the argument it came in.
    for round_ in range(2):
        for i in range(5000):
            address = parse_address(f"bb://ws/t{i % 7}/k{i}")
            assert (address.topic, address.path, address.member) == (
                f"t{i % 7}",
                f"k{i}",
                f"t{i % 7}/k{i}",
            ), round_
    with pytest.raises(InvalidArgument) as refused:
        parse_address("bb://ws/t1/k1/", argument="sources")
    assert refused.value.details["argument"] == "sources"
    with pytest.raises(InvalidArgument):
        parse_address("bb://WS/t1/k1")
    assert parse_address("bb://ws/t1/k1") == Address("ws", "t1", "k1")
    assert parse_address("bb://ws/t1/k1").uri == "bb://ws/t1/k1"


# Addresses near the rules' edges: valid parts (of the longest lengths too) and parts that
# break one rule, up to two segments more than the limit allows; and free text.
_PART = st.one_of(
    st.text(alphabet="aZ09._~-/é \n", max_size=4),
    st.sampled_from(["w" * 65, "k" * 129, ".", "..", "", "-a", "_a", ".a", "A"]),
)
_NAME_PART = st.one_of(st.sampled_from(["a", "ws", "0.9", "w" * 64]), _PART)
_VALID_SEGMENT = st.sampled_from(["s", "A~b", "x..y", "-", "k" * 128, "s@7", "s@0", "s@12@3"])
_SEGMENTS = st.one_of(
    st.lists(_VALID_SEGMENT, max_size=3),
    st.lists(_VALID_SEGMENT, min_size=MAX_DEPTH - 1, max_size=MAX_DEPTH + 2),
    st.lists(st.one_of(st.just("s"), _PART), max_size=4),
)
_NEAR_ADDRESS = st.one_of(
    st.builds(
        lambda ws, topic, segments: f"bb://{ws}/{topic}/" + "/".join(segments),
        _NAME_PART,
        _NAME_PART,
        _SEGMENTS,
    ),
    st.lists(_PART, max_size=12).map("".join),
)


@given(_NEAR_ADDRESS)
@settings(max_examples=3000, deadline=None)
def test_the_one_match_parse_accepts_exactly_what_the_part_by_part_checks_accept(
    text: str,
) -> None:
    try:
        expected: Address | str = checked_address(text)
    except InvalidArgument as exc:
        expected = exc.message
    try:
        got: Address | str = parse_address(text)
    except InvalidArgument as exc:
        got = exc.message
    assert got == expected
    if isinstance(got, Address):
        assert got.uri == text
