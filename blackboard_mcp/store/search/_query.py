"""What an agent types into search_keys, read as a search box reads it, and the RediSearch
queries built from it.

``q`` holds words, prefixes (``rep*``), exclusions (``-disk``, ``-"wal sender"``) and phrases
(``"replica lag"``, straight or curly quotes). Nothing of the caller's text reaches the query
parser as syntax: every part is cut down to plain words (``\\w+``) here, and the server adds
the operators. The workspace and topic filters are built from validated names.

Neither index keeps word positions (store/connection/_search_index.py), so a phrase is
searched as all of its words and then checked in the note's text (``Parsed.holds_phrases``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_TERMS = 32
MAX_TERM_CHARS = 64
# RediSearch expands a prefix of at least two characters (its MINPREFIX default).
MIN_PREFIX_CHARS = 2
_WORD = re.compile(r"\w+", re.UNICODE)
_PHRASE = re.compile(r"(-?)[\"“”]([^\"“”]*)[\"“”]?")
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
# Words the query parser (dialect 2) reads as syntax even alone and in parentheses; found by
# the property tests (RediSearch 2.10 added ismissing() and answers "Syntax error" to the
# bare word). Quoted, they are plain words; other words stay unquoted, because a quoted word
# is matched exactly and loses stemming ("runs" would no longer find "running").
RESERVED_WORDS = frozenset(["ismissing"])


def _words(text: str) -> list[str]:
    return [w.lower()[:MAX_TERM_CHARS] for w in _WORD.findall(text) if w.strip("_")]


def query_terms(q: str) -> list[str]:
    """The distinct plain words of ``q``, lower-cased, in order, stop words left out."""
    return list(dict.fromkeys(w for w in _words(q) if w not in STOP_WORDS))[:MAX_TERMS]


@dataclass
class Parsed:
    words: list[str] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    phrases: list[tuple[str, ...]] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    excluded_phrases: list[tuple[str, ...]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    @property
    def terms(self) -> list[str]:
        """Every positive word to match: the plain ones and the words of each phrase."""
        phrase_words = [w for p in self.phrases for w in p if w not in STOP_WORDS]
        return list(dict.fromkeys([*self.words, *phrase_words]))

    @property
    def searchable(self) -> bool:
        return bool(self.terms or self.prefixes)

    @property
    def parts(self) -> int:
        """The alternatives of a search for any part: each word, prefix and phrase."""
        return len(self.words) + len(self.prefixes) + len(self.phrases)

    def holds_phrases(self, texts: list[str]) -> bool:
        """Whether one of ``texts`` holds every phrase and none holds an excluded one."""
        spaced = [f" {' '.join(_words(t))} " for t in texts]
        for phrase in self.phrases:
            if not any(f" {' '.join(phrase)} " in s for s in spaced):
                return False
        return not any(
            f" {' '.join(phrase)} " in s for phrase in self.excluded_phrases for s in spaced
        )

    @property
    def checks_text(self) -> bool:
        return bool(self.phrases or self.excluded_phrases)


def parse_q(q: str) -> Parsed:
    parsed = Parsed()
    rest: list[str] = []
    at = 0
    for match in _PHRASE.finditer(q):
        rest.append(q[at : match.start()])
        at = match.end()
        phrase = tuple(_words(match.group(2)))
        negative = match.group(1) == "-"
        if len(phrase) > 1:
            (parsed.excluded_phrases if negative else parsed.phrases).append(phrase)
        elif phrase:
            rest.append(f" {'-' if negative else ''}{phrase[0]} ")
    rest.append(q[at:])
    for token in " ".join(rest).split():
        if token.startswith("-"):
            parsed.excluded.extend(w for w in _words(token) if w not in STOP_WORDS)
            continue
        # By hand, not with a pattern anchored at the end: one such pattern backtracks over
        # a long word once per starting point, and q is read on the event loop.
        stripped = token.rstrip("*")
        raw = _WORD.findall(stripped)
        starred = stripped != token and raw and stripped.endswith(raw[-1])
        words = [w.lower()[:MAX_TERM_CHARS] for w in (raw[:-1] if starred else raw)]
        words = [w for w in words if w.strip("_")]
        if starred:
            stem = raw[-1].lower()[:MAX_TERM_CHARS]
            if not stem.strip("_"):
                pass  # underscores alone are no word
            elif len(stem) < MIN_PREFIX_CHARS:
                parsed.notices.append(
                    f"a prefix needs at least {MIN_PREFIX_CHARS} letters before *: "
                    f"{stem}* was left out"
                )
            else:
                parsed.prefixes.append(stem)
        parsed.words.extend(w for w in words if w not in STOP_WORDS)
    parsed.words = list(dict.fromkeys(parsed.words))
    parsed.prefixes = list(dict.fromkeys(parsed.prefixes))
    parsed.excluded = list(dict.fromkeys(parsed.excluded))
    _cap(parsed)
    if not parsed.searchable and not parsed.notices:
        if parsed.excluded or parsed.excluded_phrases:
            shown = " ".join(
                [f"-{w}" for w in parsed.excluded]
                + [f'-"{" ".join(p)}"' for p in parsed.excluded_phrases]
            )
            parsed.notices.append(f"q only excludes ({shown}); give a word to search for")
        else:
            parsed.notices.append("q has no searchable words; nothing was searched")
    return parsed


def _cap(parsed: Parsed) -> None:
    """At most MAX_TERMS parts in all, a phrase counting its words: a query's cost grows with
    each part, and a phrase's check with each phrase."""
    room = MAX_TERMS
    parsed.words = parsed.words[:room]
    room -= len(parsed.words)
    parsed.prefixes = parsed.prefixes[: max(0, room)]
    room -= len(parsed.prefixes)
    parsed.phrases, room = _phrases_within(parsed.phrases, room)
    parsed.excluded = parsed.excluded[: max(0, room)]
    room -= len(parsed.excluded)
    parsed.excluded_phrases, _ = _phrases_within(parsed.excluded_phrases, room)


def _phrases_within(phrases: list[tuple[str, ...]], room: int) -> tuple[list[tuple[str, ...]], int]:
    kept: list[tuple[str, ...]] = []
    for phrase in phrases:
        if room - len(phrase) < 0:
            break
        kept.append(phrase)
        room -= len(phrase)
    return kept, room


def escape_tag(value: str) -> str:
    return _TAG_SPECIAL.sub(r"\\\1", value)


def _term(word: str, quote_all: bool) -> str:
    return f'"{word}"' if quote_all or word in RESERVED_WORDS else word


def build_query(
    workspace: str,
    topics: list[str] | None,
    parsed: Parsed,
    *,
    every: bool,
    quote_all: bool = False,
    since: int | None = None,
) -> str:
    """Filters, then the positive parts (all of them when ``every``, else any), then the
    exclusions. ``topics=None`` searches every topic of the workspace; ``since`` keeps to
    the notes last written at that sequence number or later."""
    if every:
        parts = [_term(t, quote_all) for t in parsed.terms]
        parts += [f"{p}*" for p in parsed.prefixes]
        joined = " ".join(parts)
    else:
        # A phrase is one alternative: all of its words (their order is checked in the text
        # only for the notes holding every part).
        parts = [_term(t, quote_all) for t in parsed.words]
        parts += [f"{p}*" for p in parsed.prefixes]
        for phrase in parsed.phrases:
            words = [_term(w, quote_all) for w in phrase if w not in STOP_WORDS]
            if words:
                parts.append(f"({' '.join(words)})")
        joined = " | ".join(parts)
    # A phrase excluded is checked in the text; its words are not excluded one by one.
    excluded = "".join(f" -{_term(w, quote_all)}" for w in parsed.excluded)
    scope = f"@ws:{{{escape_tag(workspace)}}}"
    if topics is not None:
        scope += f" @topic:{{{'|'.join(escape_tag(t) for t in topics)}}}"
    if since is not None:
        scope += f" @seq:[{int(since)} +inf]"
    return f"{scope} ({joined}){excluded}"
