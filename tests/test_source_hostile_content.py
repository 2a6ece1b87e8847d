"""Files whose content Python's parsers refuse get a structured answer through the gateway."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
from app_support import InProcessGateway
from support import agent_token, call

if TYPE_CHECKING:
    from blackboard_mcp.auth import TokenIssuer

# name -> (content, the code update_state answers, a phrase of the message or of the note)
HOSTILE = {
    # int('9' * 5000) raises ValueError past sys.get_int_max_str_digits() (4300).
    "bigint.json": (b'{"n": ' + b"9" * 5000 + b"}", "invalid_argument", "4300 digits"),
    "deep.json": (b"[" * 100_000 + b"]" * 100_000, "invalid_argument", "nested too deeply"),
    # Lone surrogates decode to a str that cannot be encoded back to UTF-8.
    "surrogate.json": (b'{"k\\ud800": "v\\udfff"}', "ok", '"k\\\\ud800": string'),
    "latin1.txt": (b"caf\xe9\n", "invalid_argument", "not UTF-8 text"),
    "bom-only.md": (b"\xef\xbb\xbf", "ok", "0 lines"),
    "huge-cell.csv": (b'a,b\n"' + b"x" * 200_000 + b'"\n', "invalid_argument", "field limit"),
    "nul.txt": (b"text\x00more", "invalid_argument", "binary files"),
    "nan.json": (b'{"a": NaN, "b": -Infinity, "c": 1e999999}', "ok", '"a": number'),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_hostile_file_content_gets_a_structured_answer(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str, name: str
) -> None:
    content, expected, phrase = HOSTILE[name]
    assert app_gateway.source_root is not None
    folder = app_gateway.source_root / uuid.uuid4().hex[:8]
    folder.mkdir()
    (folder / name).write_bytes(content)
    uri = f"bb://{workspace}/t/hostile"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        is_error, body = await call(
            client, "update_state", uri=uri, digest="hostile", source_path=f"{folder.name}/{name}"
        )
        if expected != "ok":
            assert is_error, body
            assert body["error"]["code"] == expected, body
            assert phrase in body["error"]["message"], body
            return
        assert not is_error, body
        _, note = await call(client, "get_state", uris=[uri], mode="full")
    assert phrase in str(note["items"][0]), note
