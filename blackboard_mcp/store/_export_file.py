"""An export file read for an import, one line at a time and once per pass.

An import must not write anything unless every line is good, yet must not hold the file: a
first pass checks each line and drops it, and the import then reads the file again from the
top for each of its own passes (notes, then links). So memory is one line (bounded by
``max_line_bytes``) and one batch of notes, whatever the size of the file.

The passes read a private copy, made a chunk at a time into a temporary file when the import
opens its input: standard input cannot be read twice, and a file someone writes to during
the import would otherwise give the links pass other records than the notes pass wrote
(the import then stopped half done, and running it again could not add the missing links
of the notes it had written). The copy needs free space in the temporary directory equal to
the file.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import orjson

from ._addresses import validate_workspace
from ._errors import InvalidArgument, TooLarge
from ._transfer import Imported, check_header, check_record

_CHUNK = 1024 * 1024


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
        max_body_bytes: int = 1024 * 1024,
    ) -> None:
        self.path = path
        self._stream: IO[bytes] | None = stream
        self._max = max_line_bytes
        self._max_body = max_body_bytes
        self.source = ""
        self.target = ""
        self.count = 0

    @classmethod
    def open(
        cls, path: str, *, max_line_bytes: int, max_body_bytes: int = 1024 * 1024
    ) -> ExportFile:
        """A private copy of ``path``, or of standard input for ``-``; raises OSError when
        it cannot be read or copied."""
        spool = tempfile.TemporaryFile()  # noqa: SIM115 (closed by __exit__)
        try:
            if path == "-":
                shutil.copyfileobj(sys.stdin.buffer, spool, _CHUNK)
            else:
                with Path(path).open("rb") as source:
                    shutil.copyfileobj(source, spool, _CHUNK)
        except BaseException:
            spool.close()
            raise
        return cls(spool, path=path, max_line_bytes=max_line_bytes, max_body_bytes=max_body_bytes)

    def __enter__(self) -> ExportFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def check(self, target: str | None = None) -> None:
        """Check every line, keeping none; set ``source``, ``target`` and ``count``.

        Raises InvalidArgument (``line`` in its details) at the first line that is wrong, and
        TooLarge for a line over ``max_line_bytes``.
        """
        self.source, self.count = "", 0
        for number, value in self._values():
            with _at_line(number):
                if not self.source:
                    self.source = check_header(value)
                    self.target = validate_workspace(target) if target else self.source
                    continue
                check_record(
                    value, source=self.source, target=self.target, max_body_bytes=self._max_body
                )
            self.count += 1
        if not self.source:
            raise InvalidArgument("the file is empty", argument="file", line=0)

    def records(self) -> Iterator[Imported]:
        """The checked notes, read again from the file; call it once per pass."""
        if not self.source:
            raise RuntimeError("check() the file before reading its records")
        count = 0
        try:
            values = self._values()
            next(values)  # the header, checked already
            for number, value in values:
                with _at_line(number):
                    record = check_record(
                        value, source=self.source, target=self.target, max_body_bytes=self._max_body
                    )
                yield record
                count += 1
        except InvalidArgument as exc:
            raise InvalidArgument(
                f"{exc.message}, although it was checked: the file changed during the import",
                argument="file",
                hint=_UNCHANGED,
            ) from exc
        if count != self.count:
            raise InvalidArgument(
                f"the file has {count} notes now and had {self.count} when it was checked",
                argument="file",
                hint=_UNCHANGED,
            )

    def _values(self) -> Iterator[tuple[int, Any]]:
        """(line number, JSON value) of each line that is not blank, from the top."""
        assert self._stream is not None, "use the file as a context manager"
        stream = self._stream
        stream.seek(0)
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


@contextmanager
def _at_line(number: int) -> Iterator[None]:
    """A record's InvalidArgument, told with the line it is on."""
    try:
        yield
    except InvalidArgument as exc:
        raise InvalidArgument(
            f"line {number}: {exc.message}", argument="file", line=number, hint=exc.hint
        ) from exc
