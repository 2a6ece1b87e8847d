"""``blackboard-mcp export`` and ``import``: a workspace as JSON Lines, out of one board and
into another (the embedded one of a running `serve`, or the Redis of BB_REDIS_URL)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO

from blackboard_mcp.settings import Settings
from blackboard_mcp.store import (
    Board,
    ExportFile,
    ImportLimits,
    ImportReport,
    InvalidArgument,
    TooLarge,
    export_header,
    validate_workspace,
)

from ._board import audit, on_board, operator, require_workspace
from ._errors import PROG, CliError, ConfigurationError
from ._redis import redis_url


class _Progress:
    """A one-line counter on stderr, only when stderr is a terminal (never in a pipe or log)."""

    def __init__(self, verb: str, total: int) -> None:
        self._verb = verb
        self._total = total
        self._shown = sys.stderr.isatty()

    def update(self, done: int) -> None:
        if self._shown:
            width = 30
            filled = width * done // self._total if self._total else width
            bar = "#" * filled + "-" * (width - filled)
            print(f"\r{self._verb} [{bar}] {done}/{self._total}", end="", file=sys.stderr)

    def close(self) -> None:
        if self._shown:
            print(file=sys.stderr)
            self._shown = False  # once


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    workspace = validate_workspace(args.workspace)
    out_path: Path | None = args.out

    async def run(board: Board) -> tuple[int, int, int]:
        await require_workspace(board, workspace)
        total = await board.count_notes(workspace)
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        with _output(out_path) as out:
            out.write(json.dumps(export_header(workspace, total, now)) + "\n")
            progress = _Progress("exporting", total)
            count = links = versions = 0
            async for record in board.export_notes(workspace):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                if "current_version" in record:
                    versions += 1  # a kept past version, just before its note
                    continue
                count += 1
                links += len(record["links"])
                if count % 100 == 0:
                    progress.update(count)
            progress.update(count)
            progress.close()
        where = str(out_path) if out_path else "stdout"
        await audit(
            board, settings, workspace=workspace, tool="cli.export",
            target=f"bb://{workspace}/", outcome=f"exported {count} to {where}",
        )  # fmt: skip
        return count, links, versions

    count, links, versions = on_board(settings, run)
    print(
        f"exported {count} notes ({versions} past versions kept with them) and {links} links "
        f"of workspace {workspace!r}" + (f" to {out_path}" if out_path else ""),
        file=sys.stderr,
    )
    return 0


class _output:
    """``path`` written whole or not at all, or stdout.

    The export goes to a temporary file beside ``path`` that only this process can have made
    (``mkstemp``: a random name, created exclusively, mode 0600, never through a symbolic
    link), renamed over ``path`` at the end. An export holds a workspace's whole data: a
    predictable name could be planted by another local user to read it, or to redirect the
    write onto a file of theirs.
    """

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._temp: Path | None = None
        self._file: IO[str] | None = None

    def __enter__(self) -> IO[str]:
        if self._path is None:
            return sys.stdout
        try:
            fd, name = tempfile.mkstemp(
                dir=self._path.parent, prefix=f".{self._path.name}.", suffix=".partial"
            )
        except OSError as exc:
            raise ConfigurationError(
                f"cannot write beside {self._path}: {exc.strerror or exc}",
                hint="give --out a file in a directory you may write to",
            ) from exc
        self._temp = Path(name)
        self._file = os.fdopen(fd, "w", encoding="utf-8")
        return self._file

    def __exit__(
        self,
        kind: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if self._file is None or self._temp is None or self._path is None:
            sys.stdout.flush()
            return
        self._file.close()
        if kind is None:
            os.replace(self._temp, self._path)
        else:
            self._temp.unlink(missing_ok=True)


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    try:
        export = ExportFile.open(
            args.file,
            max_line_bytes=settings.import_max_line_bytes,
            limits=ImportLimits(
                max_body_bytes=settings.max_body_bytes,
                offload_bytes=settings.offload_bytes,
                history_versions=settings.history_versions,
            ),
        )
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read {args.file}: {exc.strerror or exc}", hint="check the file's path"
        ) from exc
    with export:
        # Every line is checked before anything is written (a bad line leaves the board as
        # it was); the import then reads the checked records again for each of its passes.
        _checked(export, args.workspace)
        # A board that is not there is said before anything starts, as every command says it.
        redis_url(settings)
        total = export.count
        bars = {"notes": _Progress("importing", total), "links": _Progress("linking", total)}
        where = {"pass": "notes", "done": 0}

        def progress(phase: str, done: int) -> None:
            if phase != where["pass"]:
                bars[str(where["pass"])].close()
            where["pass"], where["done"] = phase, done
            bars[phase].update(done)

        async def run(board: Board) -> ImportReport:
            report = await board.import_notes(
                export.records,
                workspace=export.target,
                replace=args.replace,
                author=operator(),
                progress=progress,
            )
            await audit(
                board, settings, workspace=export.target, tool="cli.import",
                target=f"bb://{export.target}/",
                outcome=f"imported {report.imported}, skipped {report.skipped}",
            )  # fmt: skip
            return report

        def stopped_at() -> str:
            done = where["done"]
            if where["pass"] == "notes":
                return f"after {done} of {total} records (notes and past versions)"
            return f"with every note written and the links of {done} of {total} records added"

        resume = (
            "run the same command again to finish it: the notes this run wrote are "
            "recognised and kept, and get their links"
            + ("" if not args.replace else " (with --replace, every note is written again)")
        )
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            report = on_board(settings, run)
        except KeyboardInterrupt:
            for bar in bars.values():
                bar.close()
            print(f"{PROG}: the import was interrupted {stopped_at()}", file=sys.stderr)
            print(f"{PROG}: {resume}", file=sys.stderr)
            return 130
        except CliError as exc:
            for bar in bars.values():
                bar.close()
            raise ImportStopped(
                f"{exc.message}; the import stopped {stopped_at()}",
                hint=f"{exc.hint}, then {resume}",
            ) from exc
        finally:
            signal.signal(signal.SIGTERM, previous)
        for bar in bars.values():
            bar.close()
    source, target = export.source, export.target
    moved = f" (exported from {source!r})" if source != target else ""
    lines = [f"imported {report.imported} notes into workspace {target!r}{moved}"]
    if report.resumed:
        lines.append(
            f"  {report.resumed} already there with the same version and digest (written by "
            "an earlier run of this import, or the same notes): kept, links added"
        )
    lines.append(
        f"  {report.replaced} replaced, {report.skipped} skipped (already there; --replace "
        "overwrites them)"
    )
    lines.append(
        f"  {report.links} links added, {report.links_skipped} skipped (a note at either end "
        f"is missing), {report.links_of_skipped} of skipped notes left as the board has them"
    )
    dropped = (
        f"; {export.dropped} older ones dropped, past the {settings.history_versions} a note "
        "keeps (BB_HISTORY_VERSIONS)"
        if export.dropped
        else ""
    )
    lines.append(f"  {report.versions} past versions kept with the notes written{dropped}")
    print("\n".join(lines))
    return 0


class ImportStopped(CliError):
    """An import that failed part-way: running it again completes it."""


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    # SIGTERM stops an import as Ctrl-C does, so that it says how far it got.
    raise KeyboardInterrupt


def _checked(export: ExportFile, target: str | None) -> None:
    try:
        export.check(target)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read {export.path}: {exc.strerror or exc}", hint="check the file's path"
        ) from exc
    except InvalidArgument as exc:
        raise ConfigurationError(
            f"{export.path}: {exc.message}; nothing was imported",
            hint=exc.hint
            if isinstance(exc, TooLarge)
            else "give an unchanged file written by `blackboard-mcp export`",
        ) from exc


def add_transfer_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = sub.add_parser(
        "export",
        help="write every note of a workspace as JSON Lines",
        description="Write every note of a workspace, with its versions, digest, full content "
        "(tables and offloaded bodies included), sources, confidence, author, times and links, "
        "as JSON Lines: a header line with the format version, then one note a line.",
    )
    export.add_argument("--workspace", required=True, help="the workspace to export")
    export.add_argument(
        "--out", type=Path, help="the file to write (default: stdout); written whole or not at all"
    )
    export.set_defaults(func=cmd_export, parser=export)
    load = sub.add_parser(
        "import",
        help="load a file written by `export` into the board",
        description="Load an export into the board this command is configured for "
        "(BB_REDIS_URL, or the running `serve` of BB_DATA_DIR). Versions, links and content "
        "are kept byte for byte; notes already there are kept unless --replace.",
    )
    load.add_argument("file", help="the export file ('-' reads stdin)")
    load.add_argument("--workspace", help="import into this workspace (default: the one exported)")
    load.add_argument("--replace", action="store_true", help="overwrite notes that exist already")
    load.set_defaults(func=cmd_import, parser=load)
