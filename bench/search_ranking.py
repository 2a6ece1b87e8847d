"""Search ranking on a labelled board: precision at 5, side by side with other revisions.

    python bench/search_ranking.py [--against REV]...

The board and the queries are bench/_search_labels.py: 28 notes an outage fleet would write,
10 queries as agents type them (words, a prefix, an exclusion, a phrase), each with the notes
judged relevant. Each revision's gateway gets an embedded Redis of its own, the notes are
written through ``update_state`` and the queries sent through ``search_keys`` (raw JSON-RPC
over HTTP), and each query's precision at 5 is printed per revision, with the mean.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx
import orjson
from _harness import bench_token, each_revision, post_mcp
from _search_labels import NOTES, QUERIES, precision_at_5

WS = "rank"


def _call(http: httpx.Client, url: str, token: str, tool: str, **arguments: Any) -> Any:
    result = post_mcp(http, url, token, "tools/call", {"name": tool, "arguments": arguments})
    body = orjson.loads(result["content"][0]["text"])
    if result.get("isError"):
        raise SystemExit(f"{tool} failed: {body}")
    return body


def ranked_names(http: httpx.Client, url: str, token: str, q: str) -> list[str]:
    body = _call(http, url, token, "search_keys", q=q)
    prefix = f"bb://{WS}/"
    return [item["uri"].removeprefix(prefix) for item in body["items"]]


def measure(url: str) -> list[float]:
    token = bench_token(workspace=WS)
    with httpx.Client(timeout=30) as http:
        for name, (digest, body) in NOTES.items():
            _call(
                http, url, token, "update_state", uri=f"bb://{WS}/{name}", digest=digest, body=body
            )
        return [
            precision_at_5(ranked_names(http, url, token, query.q), query.relevant)
            for query in QUERIES
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    args = parser.parse_args()
    columns = {label: measure(url) for label, url in each_revision(args.against)}
    labels = list(columns)
    print("| query | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for i, query in enumerate(QUERIES):
        cells = " | ".join(f"{columns[label][i]:.2f}" for label in labels)
        print(f"| `{query.q}` | {cells} |")
    means = " | ".join(f"**{sum(columns[label]) / len(columns[label]):.2f}**" for label in labels)
    print(f"| mean precision at 5 | {means} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
