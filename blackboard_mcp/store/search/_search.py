"""search_keys: RediSearch over digests (weighted higher) and bodies, inside the caller's topics.

Two queries, one round trip each, side by side: the notes index finds the notes holding any
of the words anywhere, the digests index the ones holding them in their digests. A note's
score is its notes-index score plus DIGEST_WEIGHT times its digests-index score, so a digest
match ranks above a note that matches the same words in its body only.

The caller's text never reaches the query parser as syntax: it is cut into plain words, and
the workspace and topic filters are built by the server from validated names. Whatever the
text holds (``*``, ``@topic:{x}``, ``-``, ``|``, quotes, braces), it can only add words.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import redis.asyncio as aioredis
from redis.commands.search.query import Query
from redis.exceptions import ResponseError

from .._errors import Unavailable
from ..connection import _keys as keys
from ..connection._redis_errors import mapped_redis_errors
from ..notes._links import decode_links, link_warnings
from ..notes._tokencount import TokenCounter
from ..reads._budget import DEFAULT_BUDGET, Entry, finish, fit, plan
from ..reads._views import Readable, every_topic
from ..requests import SearchKeys
from ._index import DIGEST_WEIGHT, ensure_index, wait_until_indexed

log = logging.getLogger(__name__)

MAX_TERMS = 32
MAX_TERM_CHARS = 64
# search_keys takes no budget argument: its answer is held to the reads' default budget.
SEARCH_BUDGET = DEFAULT_BUDGET
# How long a search that had to rebuild the index waits for its scan of the existing notes
# before answering from what was scanned so far, with a warning.
REBUILD_WAIT_S = 2.0
_WORD = re.compile(r"\w+", re.UNICODE)
# Search-engine syntax an agent may type: a prefix star, a leading minus, a quote.
_OPERATORS = re.compile(r"\w\*|(?:^|\s)-\w|[\"“”]")
_TAG_SPECIAL = re.compile(r"([^A-Za-z0-9_])")
# RediSearch's default stop words. The index drops them, so a query made only of them would
# leave nothing but the filters and match every note the caller may read.
STOP_WORDS = frozenset(
    [
        "a",
        "is",
        "the",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)


def query_terms(q: str) -> list[str]:
    """The distinct words of ``q``, lower-cased, in order, at most MAX_TERMS."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(q):
        word = match.group(0).lower()[:MAX_TERM_CHARS]
        # A lone "_" is a syntax error to the query parser; underscores alone are no word.
        if word in STOP_WORDS or not word.strip("_"):
            continue
        seen.setdefault(word, None)
        if len(seen) == MAX_TERMS:
            break
    return list(seen)


# Words the query parser (dialect 2) reads as syntax even alone and in parentheses; found by
# the property tests (RediSearch 2.10 added ismissing() and answers "Syntax error" to the
# bare word). Quoted, they are plain words; other words stay unquoted, because a quoted word
# is matched exactly and loses stemming ("runs" would no longer find "running").
RESERVED_WORDS = frozenset(["ismissing"])


def escape_tag(value: str) -> str:
    return _TAG_SPECIAL.sub(r"\\\1", value)


def build_query(
    workspace: str, topics: list[str] | None, terms: list[str], *, quote_all: bool = False
) -> str:
    """Filters first, then the words as alternatives; notes matching more words rank higher.

    ``topics=None`` searches every topic of the workspace (a caller who may read them all).
    """
    words = " | ".join(f'"{t}"' if quote_all or t in RESERVED_WORDS else t for t in terms)
    if topics is None:
        return f"@ws:{{{escape_tag(workspace)}}} ({words})"
    topic_filter = "|".join(escape_tag(t) for t in topics)
    return f"@ws:{{{escape_tag(workspace)}}} @topic:{{{topic_filter}}} ({words})"


def _query(
    workspace: str, topics: list[str] | None, terms: list[str], limit: int, quote_all: bool
) -> Query:
    query: Query = (
        Query(build_query(workspace, topics, terms, quote_all=quote_all))  # type: ignore[no-untyped-call]  # types-redis 4.6 stubs lag redis-py 8
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
    client: aioredis.Redis[bytes],
    counter: TokenCounter,
    request: SearchKeys,
    *,
    workspace: str,
    readable: Readable,
    index: str = keys.INDEX_NAME,
) -> dict[str, Any]:
    """``index`` is the index that holds this workspace's notes (one per cluster primary)."""
    text, topic, limit = request.q, request.topic, request.limit
    terms = query_terms(text)
    warnings: list[str] = []
    if not terms:
        warnings.append("q has no searchable words; nothing was searched")
    elif _OPERATORS.search(text):
        # What a search box elsewhere would take as syntax is only its words here: say so,
        # rather than let an empty answer read as "nothing relates".
        warnings.append(
            "search_keys matches whole words, any of them: prefixes (rep*), exclusions "
            "(-word) and phrases (quotes) were searched as their plain words"
        )
    async with mapped_redis_errors():
        pipe = client.pipeline(transaction=False)
        pipe.get(keys.sequence(workspace))
        topics: list[str] | None
        if topic is not None:
            # Scopes were checked by the gateway; the predicate is applied here as well.
            topics = [t for t in [topic] if readable(t)]
            [sequence] = await pipe.execute()
        elif readable is every_topic:
            # Nothing to leave out: no topic filter, which would double the query's cost.
            topics = None
            [sequence] = await pipe.execute()
        else:
            pipe.smembers(keys.topics(workspace))
            sequence, known = await pipe.execute()
            topics = sorted(t for t in (k.decode() for k in known) if readable(t))
        cursor = int(sequence or 0)
        if not terms or topics == []:
            return _envelope(counter, [], warnings, cursor)
        query = _query(workspace, topics, terms, limit, quote_all=False)
        try:
            scored = await _scores(client, index, query)
        except ResponseError as exc:
            message = str(exc).lower()
            if "syntax error" in message:
                # A word this server's parser reserves that RESERVED_WORDS does not know yet
                # (another RediSearch version): quoted, every word is plain text.
                log.warning("search query refused by the parser, retrying quoted: %s", exc)
                query = _query(workspace, topics, terms, limit, quote_all=True)
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
            scored = await _scores(client, index, query)
        prefix = len(keys.note(workspace, ""))
        ranked = sorted(scored.items(), key=lambda item: (-item[1], item[0]))[:limit]
        found = [(key[prefix:], score) for key, score in ranked]
        pipe = client.pipeline(transaction=False)
        for member, _ in found:
            pipe.hmget(keys.note(workspace, member), ["uri", "digest"])
            pipe.smembers(keys.links_out(workspace, member))
            pipe.smembers(keys.links_in(workspace, member))
        replies = await pipe.execute() if found else []
    entries = []
    for i, (_, score) in enumerate(found):
        stored, outgoing, incoming = replies[3 * i : 3 * i + 3]
        if stored[0] is None:
            continue  # gone since the index answered
        uri, digest = (v.decode() if v is not None else "" for v in stored)
        links = _readable_links(workspace, outgoing, incoming, readable)
        # Four significant digits tell hits apart; sixteen only cost tokens.
        item = {"uri": uri, "digest": digest, "score": float(f"{score:.4g}")}
        entries.append(Entry(uri, item, link_warnings(uri, links)))
    return _envelope(counter, entries, warnings, cursor)


async def _scores(client: aioredis.Redis[bytes], index: str, query: Query) -> dict[str, float]:
    """Each hit's key and score: its notes-index score plus the weighted digests-index score.

    Each index answers its top ``limit``; a note in the digests index's top but not in the
    notes index's (many better body matches) is scored by its digest alone.
    """
    notes, digests = await asyncio.gather(
        _search(client, index, query), _search(client, keys.digest_index(index), query)
    )
    scores = {str(doc.id): float(doc.score) for doc in notes.docs}
    for doc in digests.docs:
        key = str(doc.id)
        scores[key] = scores.get(key, 0.0) + DIGEST_WEIGHT * float(doc.score)
    return scores


async def _search(client: aioredis.Redis[bytes], index: str, query: Query) -> Any:
    return await client.ft(index).search(query)  # type: ignore[misc]  # types-redis 4.6 stubs lag redis-py 8


def _readable_links(
    workspace: str, outgoing: set[bytes], incoming: set[bytes], readable: Readable
) -> list[dict[str, str]]:
    # A link into a topic the caller may not read would leak that note's name.
    prefix = len(f"bb://{workspace}/")
    return [
        link
        for link in decode_links(workspace, outgoing, incoming)
        if readable((link.get("to") or link["from"])[prefix:].split("/", 1)[0])
    ]


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
