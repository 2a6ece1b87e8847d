"""Every item a read returns is one version of its note, whatever writes run meanwhile.

Writers rewrite a few notes with compare-and-swap, each version's digest and body derived from
its number (some bodies over the offload size, so a note moves between an inline body and a
blob); readers read them in every mode that shows content. Each answer is checked against the
version chain: the digest, body, size and author an item carries must all be those of the
version it names.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from app_support import InProcessGateway, in_process_gateway
from support import agent_token

from blackboard_mcp.auth import TokenIssuer

NOTES = 3
WRITERS = 4
READERS = 4
WRITES_PER_WRITER = 60
OFFLOAD = 10 * 1024


def digest_of(version: int) -> str:
    return f"digest of version {version}"


def body_of(version: int) -> str:
    # Every third version is over the offload size: the note moves into a blob and back.
    text = f"body of version {version}. "
    return text * (OFFLOAD // len(text) + 10) if version % 3 == 0 else text * 3


async def _writer(gateway: InProcessGateway, token: str, uris: list[str], me: int) -> int:
    written = 0
    for n in range(WRITES_PER_WRITER):
        uri = uris[(me + n) % len(uris)]
        version = (await gateway.ok(token, "get_state", uris=[uri], mode="ref"))["items"][0][
            "version"
        ]
        is_error, body = await gateway.call(
            token,
            "update_state",
            uri=uri,
            digest=digest_of(version + 1),
            body=body_of(version + 1),
            expect_version=version,
        )
        if not is_error:
            written += 1
        else:
            assert body["error"]["code"] == "conflict", body
    return written


def _torn(item: dict[str, Any]) -> str | None:
    """What in ``item`` is not of the version it names, or None."""
    version = item["version"]
    if version == 1:
        return None  # the seed version, written below with its own text
    wrong = []
    if item["digest"] != digest_of(version):
        wrong.append(f"digest {item['digest']!r}")
    if "body" in item and item["body"] != body_of(version):
        wrong.append(f"body of {len(item['body'])} chars starting {item['body'][:24]!r}")
    if "size" in item and item["size"] != len(body_of(version).encode()):
        wrong.append(f"size {item['size']}")
    return f"{item['uri']} v{version}: " + ", ".join(wrong) if wrong else None


async def _reader(
    gateway: InProcessGateway, token: str, uris: list[str], done: asyncio.Event
) -> tuple[int, list[str]]:
    reads, torn = 0, []
    modes: list[dict[str, Any]] = [
        {"mode": "full"},
        {"mode": "fields", "fields": ["digest", "version", "body", "size"]},
    ]
    while not done.is_set() or reads < 20:
        if reads % 3 == 2:
            # resources/read: the whole text, its version in _meta.
            for uri in uris:
                answer = await gateway.rpc(token, "resources/read", {"uri": uri})
                content = answer["result"]["contents"][0]
                version = content["_meta"]["version"]
                if version > 1 and content["text"] != body_of(version):
                    torn.append(f"resources/read {uri} v{version}: {content['text'][:24]!r}")
            reads += 1
            continue
        shape = modes[reads % len(modes)]
        answer = await gateway.ok(token, "get_state", uris=uris, budget_tokens=100_000, **shape)
        for item in answer["items"]:
            assert "error" not in item and "cut" not in item, item
            problem = _torn(item)
            if problem:
                torn.append(problem)
        reads += 1
    return reads, torn


@pytest.mark.parametrize("history_versions", [50, 0], ids=["history", "no-history"])
async def test_concurrent_reads_each_show_one_version(
    redis_url: str, tmp_path: Path, issuer: TokenIssuer, workspace: str, history_versions: int
) -> None:
    async with in_process_gateway(
        redis_url, tmp_path, history_versions=history_versions, rate_limit_per_minute=1_000_000
    ) as gateway:
        token = agent_token(issuer, workspace)
        uris = [f"bb://{workspace}/race/note-{i}" for i in range(NOTES)]
        for uri in uris:
            await gateway.ok(token, "update_state", uri=uri, digest="seed", body="seed")
        done = asyncio.Event()
        readers = [asyncio.create_task(_reader(gateway, token, uris, done)) for _ in range(READERS)]
        writes = await asyncio.gather(*(_writer(gateway, token, uris, me) for me in range(WRITERS)))
        done.set()
        results = await asyncio.gather(*readers)
    torn = [problem for _, found in results for problem in found]
    reads = sum(count for count, _ in results)
    assert sum(writes) >= WRITES_PER_WRITER, writes
    assert reads >= READERS * 20
    assert torn == [], f"{len(torn)} of {reads * NOTES} items torn, e.g. {torn[:3]}"
