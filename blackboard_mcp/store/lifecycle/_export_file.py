"""An export file read for an import: checked once, a line at a time, then read per pass.

An import must not write anything unless every line is good, yet must not hold the file: a
first pass reads the file once, checks each line, and keeps each checked record (already
re-addressed, ready to write) in a private temporary file rather than in memory; the import
then reads that file from the top for each of its own passes (notes, then links). So memory
is one line (bounded by ``max_line_bytes``) and one batch of notes, whatever the size of the
file, and no record is checked more than once.

The passes read this private copy, never the file itself: standard input cannot be read
twice, and a file someone writes to during the import would otherwise give the links pass
other records than the notes pass wrote (the import then stopped half done, and running it
again could not add the missing links of the notes it had written). The copy needs free
space in the temporary directory about equal to the file.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import orjson

from .._errors import InvalidArgument, TooLarge
from ..notes._addresses import Address, validate_workspace
from ._transfer import Imported, ImportLimits, check_header, check_record


class ExportFile:
    """An export opened for import; ``check`` it, then read ``records`` once per pass.

    Open it with ``ExportFile.open`` and close it as a context manager, like a file.
    """

    def __init__(
        self,
        stream: IO[bytes],
        *,
        path: str,
        max_line_bytes: int,
        limits: ImportLimits | None = None,
        owned: bool = True,
    ) -> None:
        self.path = path
        self._stream: IO[bytes] | None = stream
        self._owned = owned  # closed with the export (not so standard input)
        self._checked: IO[bytes] | None = None
        self._max = max_line_bytes
        self._limits = limits or ImportLimits()
        self.source = ""
        self.target = ""
        self.count = 0
        # Past versions per note in the file; those past the history bound, oldest first,
        # are left out of ``records`` (``dropped`` counts them).
        self._versions: dict[str, int] = {}
        self.dropped = 0

    @classmethod
    def open(
        cls, path: str, *, max_line_bytes: int, limits: ImportLimits | None = None
    ) -> ExportFile:
        """``path``, or standard input for ``-``, to be read once by ``check``; raises
        OSError when it cannot be opened (``check`` too, when it cannot be read)."""
        if path == "-":
            return cls(
                sys.stdin.buffer,
                path=path,
                max_line_bytes=max_line_bytes,
                limits=limits,
                owned=False,
            )
        stream = Path(path).open("rb")  # noqa: SIM115 (closed by __exit__)
        return cls(stream, path=path, max_line_bytes=max_line_bytes, limits=limits)

    def __enter__(self) -> ExportFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._release()
        if self._checked is not None:
            self._checked.close()
            self._checked = None

    def _release(self) -> None:
        if self._stream is not None:
            if self._owned:
                self._stream.close()
            self._stream = None

    def check(self, target: str | None = None) -> None:
        """Read the file once and check every line, keeping the checked records in a private
        temporary file (not in memory); set ``source``, ``target`` and ``count``.

        Raises InvalidArgument (``line`` in its details) at the first line that is wrong,
        TooLarge for a line over ``max_line_bytes``, and OSError when the file cannot be read.
        """
        if self._stream is None:
            raise RuntimeError("check() reads the file once, and it was read or closed")
        checked = tempfile.TemporaryFile()  # noqa: SIM115 (closed by __exit__)
        self.source, self.count = "", 0
        try:
            for number, value in self._values():
                with _at_line(number):
                    if not self.source:
                        self.source = check_header(value)
                        self.target = validate_workspace(target) if target else self.source
                        continue
                    record = check_record(
                        value, source=self.source, target=self.target, limits=self._limits
                    )
                checked.write(_spooled(record))
                self.count += 1
                if record.current is not None:
                    member = record.address.member
                    self._versions[member] = self._versions.get(member, 0) + 1
            if not self.source:
                raise InvalidArgument("the file is empty", argument="file", line=0)
        except BaseException:
            self.source, self.count = "", 0
            checked.close()
            raise
        finally:
            self._release()
        self._checked = checked
        bound = self._limits.history_versions
        self.dropped = sum(max(0, n - bound) for n in self._versions.values())

    def records(self) -> Iterator[Imported]:
        """The checked notes, read again from the private copy; call it once per pass.

        A note's past versions beyond the history bound (BB_HISTORY_VERSIONS) are left out,
        its oldest first, as writes would have dropped them.
        """
        if self._checked is None or not self.source:
            raise RuntimeError("check() the file before reading its records")
        checked = self._checked
        checked.flush()
        checked.seek(0)
        count = 0
        bound = self._limits.history_versions
        seen: dict[str, int] = {}
        while line := checked.readline():
            record = _unspooled(line, self.target)
            count += 1
            if record.current is not None:
                member = record.address.member
                seen[member] = seen.get(member, 0) + 1
                if seen[member] <= self._versions.get(member, 0) - bound:
                    continue
            yield record
        if count != self.count:
            raise InvalidArgument(
                f"the file has {count} notes now and had {self.count} when it was checked",
                argument="file",
                hint=_UNCHANGED,
            )

    def _values(self) -> Iterator[tuple[int, Any]]:
        """(line number, JSON value) of each line that is not blank, from where it is."""
        assert self._stream is not None, "use the file as a context manager"
        stream = self._stream
        number = 0
        while line := stream.readline(self._max + 1):
            number += 1
            if len(line) > self._max:
                raise TooLarge(
                    f"line {number} is longer than {self._max} bytes",
                    argument="file",
                    line=number,
                    hint="an export line holds one note; raise BB_IMPORT_MAX_LINE_BYTES for "
                    "notes this large",
                )
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InvalidArgument(
                    f"line {number} is not JSON ({exc})", argument="file", line=number
                ) from exc
            yield number, value


_UNCHANGED = "import an export that nothing is writing to"


def _spooled(record: Imported) -> bytes:
    """A checked record as one line of the private copy (JSON escapes every newline)."""
    address = record.address
    # An offloaded note's content is not in its fields (its body is empty).
    content = record.content.decode() if record.offloaded else None
    return (
        orjson.dumps(
            [
                address.topic,
                address.path,
                record.fields,
                content,
                record.links,
                address.version,
                record.current,
            ]
        )
        + b"\n"
    )


def _unspooled(line: bytes, target: str) -> Imported:
    """The record ``_spooled`` wrote, as ``check_record`` gave it."""
    topic, path, fields, content, links, version, current = orjson.loads(line)
    offloaded = content is not None
    data = content.encode() if offloaded else str(fields["body"]).encode()
    triples = tuple((str(rel), str(member), str(at)) for rel, member, at in links)
    kept = None if current is None else (int(current[0]), str(current[1]))
    return Imported(Address(target, topic, path, version), fields, data, offloaded, triples, kept)


@contextmanager
def _at_line(number: int) -> Iterator[None]:
    """A record's refusal, told with the line it is on and the field at fault."""
    try:
        yield
    except (InvalidArgument, TooLarge) as exc:
        raise type(exc)(
            f"line {number}: {exc.message}",
            argument=exc.details.get("argument", "file"),
            line=number,
            hint=exc.hint,
        ) from exc
