"""The names of a note hash's fields in Redis. Nothing outside the store sees these.

Every note is a hash of about twenty fields, and Redis stores each field's name in every
note: with the names spelt out they were about a tenth of a note's memory. Each field is
stored under one or two letters; the store's code says ``FIELD.version`` and a server-side
script says ``$version`` (``lua``). The search indexes give the indexed fields their long
names back (``AS digest``), so queries still say ``@digest:``.

A note's address is not stored: the key is the workspace and the member, which give it.
A kept past version of a note is a copy of its hash, under the same names.

Boards written before this layout are converted once, when a gateway starts
(connection/_field_layout.py); ``FORMAT_VERSION`` is what the board records when done.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from string import Template

FORMAT_VERSION = "2"


@dataclass(frozen=True)
class NoteFieldNames:
    ws: str = "w"
    topic: str = "t"
    kind: str = "k"
    digest: str = "d"
    body: str = "b"
    blob: str = "B"
    # The searchable head of an offloaded body.
    stext: str = "x"
    size: str = "z"
    version: str = "v"
    author: str = "a"
    created: str = "c"
    updated: str = "u"
    sources: str = "s"
    source_at: str = "S"
    confidence: str = "f"
    seq: str = "q"
    est_tokens: str = "e"
    digest_tokens: str = "D"
    body_tokens: str = "T"
    columns: str = "C"
    nrows: str = "n"
    origin: str = "o"

    def as_dict(self) -> dict[str, str]:
        """Each field's long name to its stored name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


FIELD = NoteFieldNames()

# The long name of each stored field, and the stored name of each long one.
LONG_NAMES: dict[str, str] = {stored: long for long, stored in FIELD.as_dict().items()}
STORED_NAMES: dict[str, str] = FIELD.as_dict()

# The fields of the layout before this one that it does not keep at all.
DROPPED_LONG_NAMES = ("uri",)


def lua(script: str) -> str:
    """A server-side script with each ``$<long name>`` replaced by the field's stored name,
    quoted for Lua (``$version`` becomes ``'v'``)."""
    return Template(script).substitute(
        {long: f"'{stored}'" for long, stored in STORED_NAMES.items()}
    )
