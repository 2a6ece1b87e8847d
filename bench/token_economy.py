"""Tokens an agent spends on a realistic board: catching up by digests within a budget vs
reading everything in full, and table mode vs the same rows as JSON. Counted with the
offline tokenizer (cl100k_base) on the serialised responses, beside what each response
reports as its ``spent_tokens``.

    python bench/token_economy.py [--notes 2000] [--seed 11]

The board comes from a seeded generator: 5 topics; text notes of 40-600 words in short
paragraphs; table notes (metrics, inventories) of 3-8 columns and 5-80 rows; links between
notes (derived_from, cites, supersedes, contradicts); and the catch-up note
``bb://demo/run/state/current``. It is written through the store's real write path.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

import orjson
from _harness import embedded_redis

from blackboard_mcp.store import (
    Board,
    GetState,
    LinkState,
    ListKeys,
    SearchKeys,
    TiktokenCounter,
    UpdateState,
    board_client,
)

WS = "demo"
TOPICS = ["research", "plans", "data", "reviews", "run"]
RELATIONS = ["derived_from", "cites", "supersedes", "contradicts", "refines"]
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fi"]
_COMMON = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "for",
    "on",
    "with",
    "that",
    "by",
    "this",
    "from",
    "as",
    "be",
    "are",
    "was",
    "it",
    "at",
    "or",
    "an",
    "we",
]


class BoardGenerator:
    """Seeded text, tables and links that look like agents' working notes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        words = {
            "".join(self.rng.choices(_SYLLABLES, k=self.rng.randint(2, 4))) for _ in range(900)
        }
        self.vocabulary = sorted(words)
        # Zipf-like weights: a few words are everywhere, most are rare.
        self.weights = [1 / (rank + 1) for rank in range(len(self.vocabulary))]

    def words(self, n: int) -> list[str]:
        out = []
        for word in self.rng.choices(self.vocabulary, weights=self.weights, k=n):
            out.append(word)
            if self.rng.random() < 0.35:
                out.append(self.rng.choice(_COMMON))
        return out[:n]

    def sentence(self) -> str:
        text = " ".join(self.words(self.rng.randint(6, 18)))
        return text[0].upper() + text[1:] + "."

    def digest(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(1, 2)))

    def text_body(self) -> str:
        target = self.rng.randint(40, 600)
        paragraphs: list[str] = []
        count = 0
        while count < target:
            paragraph = " ".join(self.sentence() for _ in range(self.rng.randint(2, 6)))
            if self.rng.random() < 0.3:
                paragraph = "## " + " ".join(self.words(3)).title() + "\n" + paragraph
            paragraphs.append(paragraph)
            count += len(paragraph.split())
        return "\n\n".join(paragraphs)

    def table(self) -> tuple[list[str], list[list[str]]]:
        columns = ["name", *(w for w in self.words(self.rng.randint(2, 7)))]
        columns = list(dict.fromkeys(columns))
        rows = []
        for i in range(self.rng.randint(5, 80)):
            row = [f"{self.rng.choice(self.vocabulary)}-{i}"]
            for _ in columns[1:]:
                if self.rng.random() < 0.7:
                    row.append(f"{self.rng.uniform(0, 1000):.2f}")
                else:
                    row.append(self.rng.choice(self.vocabulary))
            rows.append(row)
        return columns, rows


async def build_board(board: Board, notes: int, seed: int) -> dict[str, Any]:
    gen = BoardGenerator(seed)
    uris: list[str] = []
    tables: list[str] = []
    started = time.perf_counter()
    for i in range(notes):
        topic = TOPICS[i % len(TOPICS)]
        uri = f"bb://{WS}/{topic}/n{i:05d}"
        args: dict[str, Any] = {"uri": uri, "digest": gen.digest()}
        if gen.rng.random() < 0.2:
            args["columns"], args["rows"] = gen.table()
            tables.append(uri)
        else:
            args["body"] = gen.text_body()
        await board.update_state(UpdateState.parse(args), author=f"agent-{i % 7}")
        uris.append(uri)
    links = 0
    for _ in range(notes // 4):
        src, dst = gen.rng.sample(uris, 2)
        await board.link_state(
            LinkState.parse({"src": src, "rel": gen.rng.choice(RELATIONS), "dst": [dst]}),
            author="gen",
        )
        links += 1
    current = f"bb://{WS}/run/state/current"
    await board.update_state(
        UpdateState.parse(
            {
                "uri": current,
                "digest": "Where the run stands: goals, open questions, what to read first.",
                "body": "\n".join(f"- {gen.sentence()}" for _ in range(12)),
            }
        ),
        author="coordinator",
    )
    return {
        "uris": uris,
        "tables": tables,
        "links": links,
        "current": current,
        "seconds": time.perf_counter() - started,
    }


def tokens(counter: TiktokenCounter, response: dict[str, Any]) -> int:
    return counter.count(orjson.dumps(response).decode())


async def paged_read(
    board: Board, counter: TiktokenCounter, uris: list[str], mode: str, budget: int
) -> tuple[int, int]:
    """Read every address, 100 a call, carrying on from what the budget left out."""
    spent, calls, pending = 0, 0, list(uris)
    while pending:
        response = await board.get_state(
            GetState.parse({"uris": pending[:100], "mode": mode, "budget_tokens": budget})
        )
        spent += tokens(counter, response)
        calls += 1
        shown = len(pending[:100]) - response["omitted"]
        assert shown > 0, "one note is larger than the whole budget"
        pending = pending[shown:]
    return spent, calls


async def run(notes: int, seed: int) -> None:
    counter = TiktokenCounter()
    with embedded_redis() as server:
        board = Board(client=board_client(server.url))
        await board.start()
        made = await build_board(board, notes, seed)
        uris: list[str] = made["uris"]
        print(
            f"board: {notes} notes over {len(TOPICS)} topics ({len(made['tables'])} tables), "
            f"{made['links']} links, written in {made['seconds']:.1f}s; seed {seed}"
        )
        checks: list[tuple[str, int, int]] = []

        # 1. Reading everything in full, paged with the largest budget a call allows.
        full_tokens, full_calls = await paged_read(board, counter, uris, "full", 100_000)
        # 2. A catch-up as the tools describe it: the catch-up note, then each topic's newest
        #    20 notes by digest with the default budget, then 5 chosen notes in full.
        current = await board.get_state(GetState.parse({"uris": [made["current"]], "mode": "full"}))
        catch_up = tokens(counter, current)
        checks.append(("catch-up note (full)", current["spent_tokens"], catch_up))
        listed: list[str] = []
        for topic in TOPICS:
            page = await board.list_keys(
                ListKeys.parse({"topic": topic, "limit": 20}), workspace=WS
            )
            catch_up += tokens(counter, page)
            listed += [item["uri"] for item in page["items"]]
        chosen = await board.get_state(
            GetState.parse({"uris": listed[:5], "mode": "full", "budget_tokens": 100_000})
        )
        catch_up_and_read = catch_up + tokens(counter, chosen)
        checks.append(("5 chosen notes (full)", chosen["spent_tokens"], tokens(counter, chosen)))
        digests = await board.get_state(GetState.parse({"uris": uris[:100], "mode": "digest"}))
        checks.append(
            ("100 digests, budget 2,000", digests["spent_tokens"], tokens(counter, digests))
        )
        # 3. Every digest on the board, paged with the default budget (2,000 tokens a call).
        paged, calls = await paged_read(board, counter, uris, "digest", 2000)
        # 4. Table mode vs JSON: a listing, and the table notes themselves.
        as_json = await board.list_keys(
            ListKeys.parse(
                {"topic": "data", "limit": 200, "mode": "digest", "budget_tokens": 100_000}
            ),
            workspace=WS,
        )
        as_table = await board.list_keys(
            ListKeys.parse(
                {"topic": "data", "limit": 200, "mode": "table", "budget_tokens": 100_000}
            ),
            workspace=WS,
        )
        listing_json, listing_tsv = tokens(counter, as_json), tokens(counter, as_table)
        checks.append(("list_keys table mode", as_table["spent_tokens"], listing_tsv))
        table_uris = made["tables"][:100]
        tsv = await board.get_state(
            GetState.parse({"uris": table_uris, "mode": "table", "budget_tokens": 100_000})
        )
        tsv_tokens = tokens(counter, tsv)
        checks.append(("get_state table mode", tsv["spent_tokens"], tsv_tokens))
        # The same tables as an agent would get them from a JSON-only store: rows as objects.
        json_rows = 0
        for item in tsv["items"]:
            lines = item["table"].split("\n")
            header = lines[0].split("\t")
            records = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]
            json_rows += counter.count(
                orjson.dumps(
                    {**{k: v for k, v in item.items() if k != "table"}, "rows": records}
                ).decode()
            )
        # 5. The budget as a ceiling: every read at a spread of budgets, the real cost of each
        #    answer against its budget and against its own spent_tokens.
        overshoot, worst_error, reads = 0.0, 0.0, 0
        rng = random.Random(seed)
        for budget in (100, 150, 300, 700, 2000, 5000):
            for _ in range(6):
                sample = [*rng.sample(uris, 60), f"bb://{WS}/research/missing-{budget}"]
                answers = [
                    await board.get_state(
                        GetState.parse({"uris": sample, "mode": mode, "budget_tokens": budget})
                    )
                    for mode in ("full", "digest", "ref", "table")
                ]
                for topic in TOPICS:
                    for mode in ("digest", "table", "ref"):
                        answers.append(
                            await board.list_keys(
                                ListKeys.parse(
                                    {
                                        "topic": topic,
                                        "mode": mode,
                                        "limit": 200,
                                        "budget_tokens": budget,
                                    }
                                ),
                                workspace=WS,
                            )
                        )
                for answer in answers:
                    real = tokens(counter, answer)
                    overshoot = max(overshoot, real / budget)
                    worst_error = max(worst_error, abs(answer["spent_tokens"] - real) / real)
                    reads += 1
        for q in [" ".join(i["digest"].split()[:2]) for i in as_json["items"][:3]]:
            answer = await board.search_keys(SearchKeys.parse({"q": q, "limit": 50}), workspace=WS)
            real = tokens(counter, answer)
            overshoot = max(overshoot, real / 2000)
            worst_error = max(worst_error, abs(answer["spent_tokens"] - real) / real)
            reads += 1
        await board.close()

    print()
    print(f"{'what an agent reads':<58} {'tokens':>9} {'vs full':>8}")
    rows = [
        (f"everything in full ({len(uris)} notes, {full_calls} calls)", full_tokens),
        (f"every digest, default budget ({calls} calls)", paged),
        ("catch-up: current note + 5 topics x 20 digests", catch_up),
        ("catch-up, then 5 chosen notes in full", catch_up_and_read),
    ]
    for label, value in rows:
        print(f"{label:<58} {value:>9,} {value / full_tokens:>8.3f}")
    print()
    print(f"{'table mode vs JSON':<58} {'tokens':>9} {'ratio':>8}")
    print(f"{'list_keys topic=data, 200 rows: JSON items':<58} {listing_json:>9,}")
    print(
        f"{'list_keys topic=data, 200 rows: table mode':<58} {listing_tsv:>9,} "
        f"{listing_tsv / listing_json:>8.2f}"
    )
    print(f"{f'{len(table_uris)} table notes, rows as JSON objects':<58} {json_rows:>9,}")
    print(
        f"{f'{len(table_uris)} table notes, get_state mode=table (TSV)':<58} "
        f"{tsv_tokens:>9,} {tsv_tokens / json_rows:>8.2f}"
    )
    print()
    print(
        f"budget as a ceiling: {reads} reads at budgets 100-5,000: largest cost/budget "
        f"{overshoot:.3f}x; largest |spent_tokens - real| / real {worst_error:.4f}"
    )
    print("spent_tokens as reported vs counted on the serialised response:")
    for label, reported, counted in checks:
        print(f"  {label:<28} {reported:>7,} / {counted:>7,}  ({reported / counted:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    asyncio.run(run(args.notes, args.seed))


if __name__ == "__main__":
    main()
