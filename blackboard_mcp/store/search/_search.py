"""search_keys: RediSearch over digests (weighted higher) and bodies, inside the caller's topics.

Two indexes answer each query side by side, in one round trip: the notes index finds the notes
holding the words anywhere, the digests index the ones holding them in their digests. A note's
score is its notes-index score plus DIGEST_WEIGHT times its digests-index score, so a digest
match ranks above a note that matches the same words in its body only.

The notes holding every word (and every prefix and phrase) come first; when they are fewer
than ``limit``, the notes holding some of them follow, each group in score order. Exclusions
apply to both. How ``q`` is read, and why none of it reaches the parser as syntax: _query.py.

RediSearch scores every note a query matches to pick the best ``limit``, so a word that one
note in seven holds costs a board of a million notes tens of milliseconds. Each group is
therefore looked for first among the notes of the workspace's last ``window`` writes (their
``seq``), whose matches cost what the window holds whatever the board's size; when those
hold fewer than the group needs, among ten times as many writes, and so on, and among the
whole workspace's only when the widest look short of it holds too few. A word common in
older notes but rare lately is then ranked among the writes that hold enough of it, not
among every note that does. What that gives up: an older note that would outrank them is
not seen while a look's writes hold enough matches.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from redis.commands.search.query import Query
from redis.exceptions import ResponseError

from .._errors import Unavailable
from ..connection import _key_names as keys
from ..connection._board_client import BoardClient, RedisCommands
from ..connection._field_names import FIELD
from ..connection._search_index import DIGEST_WEIGHT, ensure_index, wait_until_indexed
from ..connection._tx import Gate
from ..notes._addresses import SCHEME, Address
from ..notes._provenance import provenance_warnings
from ..notes._tokencount import TokenCounter
from ..reads._budget import Entry, finish, fit, plan
from ..reads._reads import Fetched, fetch_meta, judge_provenance, readable_links
from ..reads._views import Readable, every_topic
from ..requests import SearchKeys
from ..requests._read_options import DEFAULT_BUDGET
from ._query import Parsed, build_query, parse_q

log = logging.getLogger(__name__)

# What a hit's item shows, and what judging its provenance needs (store/notes/_provenance.py).
_HIT_FIELDS = ["digest", "version", "sources", "source_at"]

# search_keys takes no budget argument: its answer is held to the reads' default budget.
SEARCH_BUDGET = DEFAULT_BUDGET
# How long a search that had to rebuild the index waits for its scan of the existing notes
# before answering from what was scanned so far, with a warning.
REBUILD_WAIT_S = 2.0
# Candidates fetched per hit wanted when phrases are checked in the text: some fail the check.
PHRASE_CANDIDATES = 4
# Each look at the latest writes that finds too few matches is followed by one at this many
# times as many writes.
WIDENING = 10


def _looks(cursor: int, window: int) -> list[int | None]:
    """The lowest sequence number of each look a group may take, narrowest first: the last
    ``window`` writes, ``WIDENING`` times as many, and so on, then the whole workspace
    (None). Sequence numbers start at 1: a look as wide as the writes is the whole."""
    looks: list[int | None] = []
    size = window
    while 0 < size < cursor:
        looks.append(cursor - size + 1)
        size *= WIDENING
    looks.append(None)
    return looks


def _query(
    workspace: str,
    topics: list[str] | None,
    parsed: Parsed,
    limit: int,
    *,
    every: bool,
    quote_all: bool,
    since: int | None,
) -> Query:
    text = build_query(workspace, topics, parsed, every=every, quote_all=quote_all, since=since)
    query: Query = (
        Query(text)  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
        # Ids only: on a cluster node RediSearch 2.10 returns no fields of a document whose
        # slot differs from the slot of the index name (checked here), and a primary's index
        # holds many workspaces' slots. The note's uri and digest come from its hash, read
        # in the pipeline that reads its links.
        .no_content()
        .with_scores()
        .paging(0, limit)
        .scorer("BM25STD")
        .dialect(2)
    )
    return query


async def search_keys(
    client: RedisCommands,
    counter: TokenCounter,
    request: SearchKeys,
    *,
    workspace: str,
    readable: Readable,
    home: BoardClient,
    index: str = keys.INDEX_NAME,
    window: int = 0,
    gate: Gate | None = None,
) -> dict[str, Any]:
    """``client`` and ``index`` search this workspace's notes (one index per cluster primary,
    or the coordinator's); ``home`` is the workspace's own node, which the provenance of
    the hits is read from. ``window``: how many of the latest writes are looked among first
    (0: the whole workspace at once). ``gate`` (the call's admission) rides the first round
    trip to ``home`` and is judged before anything read is used."""
    topic, limit = request.topic, request.limit
    parsed = parse_q(request.q)
    warnings = list(parsed.notices)
    async with home.operation(), home.admitted(gate) as home:
        # The workspace's keys are on its own node: read on the store's own wires.
        topics: list[str] | None
        if topic is not None:
            # Scopes were checked by the gateway; the predicate is applied here as well.
            topics = [t for t in [topic] if readable(t)]
            [sequence] = await home.round_trip([("GET", keys.sequence(workspace))])
        elif readable is every_topic:
            # Nothing to leave out: no topic filter, which would double the query's cost.
            topics = None
            [sequence] = await home.round_trip([("GET", keys.sequence(workspace))])
        else:
            sequence, known = await home.round_trip(
                [("GET", keys.sequence(workspace)), ("SMEMBERS", keys.topics(workspace))]
            )
            topics = sorted(t for t in (k.decode() for k in known) if readable(t))
        cursor = int(sequence or 0)
        if not parsed.searchable or topics == []:
            return _envelope(counter, [], warnings, cursor)
        looks = _looks(cursor, window)
        search = _Search(client, index, workspace, topics, parsed, limit, warnings)
        ranked: list[tuple[str, float]] = []
        for every in (True, False) if parsed.parts > 1 else (True,):
            wanted = limit - len(ranked)
            if wanted <= 0:
                break
            for since in looks:
                group = await search.group(ranked, every=every, since=since)
                if len(group) >= wanted:
                    break  # else these writes hold too few of them: wider
            ranked.extend(group[:wanted])
        key_prefix = len(keys.note(workspace, ""))
        found = [(_hit_address(workspace, key[key_prefix:]), score) for key, score in ranked]
        # The hits' fields and links, as get_state reads them: one round trip on a wire.
        fetched_all, _, _ = (
            await fetch_meta(home, workspace, [a for a, _ in found], _HIT_FIELDS)
            if found
            else ([], 0, [])
        )
        hits: list[tuple[Address, float]] = []
        fetched: Fetched = []
        for (address, score), got in zip(found, fetched_all, strict=True):
            if got[0] is None:
                continue  # gone since the index answered
            hits.append((address, score))
            fetched.append(got)
        addresses = [address for address, _ in hits]
        judged = await judge_provenance(home, addresses, fetched, readable)
    entries = []
    for (_, score), (hit, outgoing, incoming, _), provenance in zip(
        hits, fetched, judged, strict=True
    ):
        assert hit is not None
        uri = hit["uri"]
        links = readable_links(workspace, outgoing, incoming, readable)
        # Four significant digits tell hits apart; sixteen only cost tokens.
        item = {"uri": uri, "digest": hit["digest"], "score": float(f"{score:.4g}")}
        said = provenance_warnings(
            uri,
            int(hit["version"] or 0),
            links,
            provenance,
            workspace_prefix=f"{SCHEME}{workspace}/",
            readable=readable,
        )
        entries.append(Entry(uri, item, said))
    return _envelope(counter, entries, warnings, cursor)


def _hit_address(workspace: str, member: str) -> Address:
    topic, path = member.split("/", 1)
    return Address(workspace, topic, path)


@dataclass(frozen=True)
class _Search:
    """One search_keys call's query, run a group at a time."""

    client: RedisCommands
    index: str
    workspace: str
    topics: list[str] | None
    parsed: Parsed
    limit: int
    warnings: list[str]

    async def group(
        self, ranked: list[tuple[str, float]], *, every: bool, since: int | None
    ) -> list[tuple[str, float]]:
        """The group's hits not ``ranked`` already, best first, their phrases checked."""
        parsed = self.parsed
        # The notes holding every part must hold the phrases; all must hold no excluded one.
        checked = parsed.checks_text if every else bool(parsed.excluded_phrases)
        fetch = self.limit * (PHRASE_CANDIDATES if checked else 1) + len(ranked)
        scored = await _run(
            self.client,
            self.index,
            self.workspace,
            self.topics,
            parsed,
            fetch,
            every,
            self.warnings,
            since,
        )
        seen = {key for key, _ in ranked}
        group = sorted(
            ((k, v) for k, v in scored.items() if k not in seen),
            key=lambda item: (-item[1], item[0]),
        )
        if checked:
            group = await _with_phrases(self.client, parsed, group, every)
        return group


async def _run(
    client: RedisCommands,
    index: str,
    workspace: str,
    topics: list[str] | None,
    parsed: Parsed,
    limit: int,
    every: bool,
    warnings: list[str],
    since: int | None,
) -> dict[str, float]:
    """One group's hits and scores, recovering from a parser refusal or a missing index."""
    query = _query(workspace, topics, parsed, limit, every=every, quote_all=False, since=since)
    try:
        return await _scores(client, index, query, exact=bool(parsed.excluded))
    except ResponseError as exc:
        message = str(exc).lower()
        if "syntax error" in message:
            # A word this server's parser reserves that RESERVED_WORDS does not know yet
            # (another RediSearch version): quoted, every word is plain text.
            log.warning("search query refused by the parser, retrying quoted: %s", exc)
            query = _query(
                workspace, topics, parsed, limit, every=every, quote_all=True, since=since
            )
        elif "no such index" in message:
            # The index went away (a FLUSHALL, a new empty Redis): rebuild it and retry
            # once it has indexed the notes already there.
            await ensure_index(client, index)
            if not await wait_until_indexed(client, timeout=REBUILD_WAIT_S, name=index):
                warnings.append(
                    "the search index is being rebuilt; these results may be incomplete"
                )
        else:
            raise Unavailable("the search index could not answer this query") from exc
        return await _scores(client, index, query, exact=bool(parsed.excluded))


async def _with_phrases(
    client: RedisCommands, parsed: Parsed, group: list[tuple[str, float]], every: bool
) -> list[tuple[str, float]]:
    """The hits whose text holds the phrases asked for (all of them, for the notes holding
    every part; at least not an excluded one, for the others) and none excluded.

    The text is what the index holds: digest, body, or an offloaded body's searchable head."""
    pipe = client.redis.pipeline(transaction=False)
    for key, _ in group:
        pipe.hmget(key, [FIELD.digest, FIELD.body, FIELD.stext])
    replies = await pipe.execute() if group else []
    wanted = parsed if every else Parsed(excluded_phrases=parsed.excluded_phrases)
    kept = []
    for hit, fields in zip(group, replies, strict=True):
        texts = [v.decode("utf-8", "ignore") for v in fields if v]
        if wanted.holds_phrases(texts):
            kept.append(hit)
    return kept


async def _scores(
    client: RedisCommands, index: str, query: Query, *, exact: bool
) -> dict[str, float]:
    """Each hit's key and score: its notes-index score plus the weighted digests-index score.

    Each index answers its top ``limit``; a note in the digests index's top but not in the
    notes index's (many better body matches) is scored by its digest alone, unless the query
    excludes words (``exact``): the digests index cannot see a word excluded from the body.
    """
    notes, digests = await asyncio.gather(
        _search(client, index, query), _search(client, keys.digest_index(index), query)
    )
    scores = {str(doc.id): float(doc.score) for doc in notes.docs}
    for doc in digests.docs:
        key = str(doc.id)
        if exact and key not in scores:
            continue
        scores[key] = scores.get(key, 0.0) + DIGEST_WEIGHT * float(doc.score)
    return scores


async def _search(client: RedisCommands, index: str, query: Query) -> Any:
    return await client.redis.ft(index).search(query)  # type: ignore[misc]  # types-redis 4.6 stubs lag redis-py 8


def _envelope(
    counter: TokenCounter, entries: list[Entry], notices: list[str], cursor: int
) -> dict[str, Any]:
    """Hits under the default read budget, the ones left out listed by address."""

    def render(items: list[dict[str, Any]], warnings: list[str], shown: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "items": items,
            "spent_tokens": 0,
            "truncated": shown < len(entries),
            "omitted": len(entries) - shown,
            "omitted_uris": [e.uri for e in entries[shown:]],
            "cursor": cursor,
        }
        if notices or warnings:
            out["warnings"] = [*notices, *warnings]
        return out

    base = finish(counter, render([], [], 0))
    return fit(
        counter, SEARCH_BUDGET, entries, plan(counter, SEARCH_BUDGET, entries, base), render
    ).response
