"""The parts of a note, followed through ``cut.rest``, join to exactly its text, for any text.

A cut ends at a character's end (a token of cl100k may end inside an emoji or a CJK
character), the rest's offset is the byte after the last one shown, and a part whose offset
falls inside a character starts at that character's first byte. Through the gateway in
process, on the real Redis, for bodies kept in the note's hash and offloaded to a blob.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from app_support import InProcessGateway, gateway_in_a_loop, in_process_gateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import agent_token

from blackboard_mcp.auth import TokenIssuer

REPLACEMENT = "\ufffd"


async def read_all(
    gateway: InProcessGateway, token: str, uri: str, budget: int
) -> tuple[str, list[str]]:
    """Follow ``cut.rest`` from ``uri`` to the end: the pieces joined, and the rests read."""
    pieces: list[str] = []
    rests: list[str] = []
    address = uri
    for _ in range(2000):
        answer = await gateway.ok(
            token, "get_state", uris=[address], mode="full", budget_tokens=budget
        )
        assert answer["spent_tokens"] <= budget, answer
        if not answer["items"]:
            # Not even a cut fits beside the envelope: read again with the budget it names,
            # as an agent would.
            assert answer["need_budget"] > budget, answer
            budget = answer["need_budget"]
            continue
        [item] = answer["items"]
        assert "error" not in item, item
        pieces.append(item["body"])
        cut = item.get("cut")
        if cut is None:
            return "".join(pieces), rests
        rests.append(cut["rest"])
        address = cut["rest"]
    raise AssertionError("the rests never ended")


@pytest.fixture
async def gateway(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    async with in_process_gateway(redis_url, tmp_path, rate_limit_per_minute=1_000_000) as gw:
        yield gw


@pytest.mark.parametrize(
    "body",
    ["\U0001f600" * 3000, "龘靐齉" * 1000, "naïve café " * 400 + "🙂" * 7],
    ids=["emoji-offloaded", "cjk-in-the-note", "mixed"],
)
async def test_the_parts_of_a_non_ascii_note_join_to_its_text(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, body: str
) -> None:
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/notes/wide"
    await gateway.ok(token, "update_state", uri=uri, digest="wide characters", body=body)
    joined, rests = await read_all(gateway, token, uri, budget=300)
    assert len(rests) >= 2
    assert REPLACEMENT not in joined
    assert joined == body


@pytest.mark.parametrize("size", [1, 4000], ids=["in-the-note", "offloaded"])
async def test_an_offset_inside_a_character_starts_at_that_character(
    gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, size: int
) -> None:
    token = agent_token(issuer, workspace)
    uri = f"bb://{workspace}/notes/emoji"
    body = "ab" + "😀🎉" * size
    await gateway.ok(token, "update_state", uri=uri, digest="emoji", body=body)
    # Byte 2 starts the first emoji; 3, 4 and 5 are inside it.
    for offset in (3, 4, 5):
        answer = await gateway.ok(
            token, "get_state", uris=[f"{uri}@1#{offset}"], mode="full", budget_tokens=300
        )
        [item] = answer["items"]
        assert item["body"].startswith("😀🎉"), (offset, item["body"][:4])
        assert REPLACEMENT not in item["body"]
        if "cut" in item:
            # The rest follows what was shown, counted from the character's start.
            shown = len(item["body"].encode())
            assert item["cut"]["rest"] == f"{uri}@1#{2 + shown}"
        else:
            assert item["body"] == body[2:]


# Letters of the scripts agents write in, with no spaces to break at: emoji (some of them
# several code points), CJK, combining marks, right-to-left scripts, and anything else.
_CHARACTERS = st.one_of(
    st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    st.characters(min_codepoint=0x0300, max_codepoint=0x036F),
    st.characters(min_codepoint=0x0590, max_codepoint=0x06FF),
    st.sampled_from(["\u200d", "\ufe0f", "a", "é", "\n"]),
    st.characters(exclude_categories=["Cs"]),
)


def test_any_text_read_in_parts_joins_to_exactly_that_text(
    redis_url: str, tmp_path: Path, issuer: TokenIssuer
) -> None:
    token = agent_token(issuer, "parts")
    # Bodies over 2 KB are offloaded: the examples hold both kinds.
    with gateway_in_a_loop(
        redis_url, tmp_path, rate_limit_per_minute=1_000_000, offload_bytes=2048
    ) as (runner, gateway):
        written = 0

        @settings(
            max_examples=60,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(
            body=st.text(_CHARACTERS, min_size=300, max_size=1500),
            budget=st.integers(min_value=120, max_value=600),
        )
        def check(body: str, budget: int) -> None:
            nonlocal written
            written += 1
            uri = f"bb://parts/notes/n{written}"

            async def example() -> None:
                await gateway.ok(token, "update_state", uri=uri, digest="any text", body=body)
                joined, _ = await read_all(gateway, token, uri, budget)
                assert joined == body

            runner.run(example())

        check()
