"""search_keys ranks what agents look for first, on a small labelled board.

The board and the judged queries are bench/_search_labels.py; bench/search_ranking.py prints
the same figure side by side with other revisions (bench/RESULTS.md: 0.74 before notes
holding every word ranked first and prefixes, exclusions and phrases were read as such).
Through the real path: MCP client -> the gateway app -> Redis.
"""

from __future__ import annotations

import sys
from pathlib import Path

from app_support import InProcessGateway
from support import agent_token, call

from blackboard_mcp.auth import TokenIssuer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from _search_labels import NOTES, QUERIES, precision_at_5

MEAN_AT_LEAST = 0.9
EACH_AT_LEAST = 0.5


async def test_precision_at_5_on_the_labelled_board(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    prefix = f"bb://{workspace}/"
    async with app_gateway.mcp_client(agent_token(issuer, workspace)) as client:
        for name, (digest, body) in NOTES.items():
            err, wrote = await call(
                client, "update_state", uri=prefix + name, digest=digest, body=body
            )
            assert not err, wrote
        scores = {}
        for query in QUERIES:
            err, found = await call(client, "search_keys", q=query.q)
            assert not err and "warnings" not in found, found
            ranked = [item["uri"].removeprefix(prefix) for item in found["items"]]
            scores[query.q] = precision_at_5(ranked, query.relevant)
    print(scores)
    assert sum(scores.values()) / len(scores) >= MEAN_AT_LEAST, scores
    assert min(scores.values()) >= EACH_AT_LEAST, scores
