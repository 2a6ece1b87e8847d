"""Import and export of large workspaces through the real CLI: notes/s and the CLI's peak RSS.

For each size, an export file is written the way ``blackboard-mcp export`` writes one: text
notes of a few hundred bytes, every 20th a table, every 50th an offloaded body of 24 KB, each
note citing the one before it. Then, against a fresh embedded Redis: ``blackboard-mcp import``
of that file, and ``blackboard-mcp export --out`` of the imported workspace, each as its own
process, timed from start to exit, its peak resident memory read from the kernel
(``wait4``). The two sizes side by side show whether memory grows with the file. Targets:
import >= 2,000 notes/s, export >= 5,000 notes/s, RSS flat in the file size.

``--against REV`` runs the same import and export with the CLI as it was at git revision REV
too, each size against a Redis of its own, side by side in the same run.

    python bench/transfer.py [--notes 25000,100000] [--against REV]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _harness import embedded_redis, revisions, scratch

WORKSPACE = "transfer"


def write_export(path: Path, notes: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        header = {"format": "blackboard-mcp-export", "version": 1, "workspace": WORKSPACE}
        out.write(json.dumps(header) + "\n")
        for i in range(notes):
            kind, columns = "text", None
            if i % 50 == 0:
                content = f"offloaded report {i}: " + "measurements of the standby's lag " * 700
            elif i % 20 == 0:
                kind, columns = "table", ["host", "lag_ms", "state"]
                content = "\n".join(
                    ["host\tlag_ms\tstate"] + [f"db-{r}\t{(i * r) % 97}\tok" for r in range(8)]
                )
            else:
                content = f"note {i}: checked replica lag on node-{i % 7}; WAL at {i * 37} MB. " * 4
            size = len(content.encode())
            record = {
                "uri": f"bb://{WORKSPACE}/t{i % 16}/n{i}",
                "kind": kind,
                "version": 1 + i % 3,
                "digest": f"Note {i} of the run.",
                "content": content,
                "offloaded": size > 10 * 1024,
                "columns": columns,
                "sources": [],
                "confidence": None,
                "author": "bench",
                "origin": "",
                "size": size,
                "est_tokens": size // 4,
                "digest_tokens": 6,
                "body_tokens": size // 4,
                "nrows": 8 if kind == "table" else 0,
                "created": 1_733_300_000_000 + i,
                "updated": 1_733_300_000_000 + i,
                "links": (
                    [{"rel": "cites", "to": f"bb://{WORKSPACE}/t{(i - 1) % 16}/n{i - 1}"}]
                    if i
                    else []
                ),
            }
            out.write(json.dumps(record) + "\n")


def timed(
    command: list[str], env: dict[str, str], cwd: str | None = None
) -> tuple[float, float, str]:
    """(seconds, peak RSS in MiB, stdout+stderr) of one CLI process."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    output = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command[3:])} failed ({proc.returncode}): {output}")
    return seconds, usage.ru_maxrss / 1024, output


def measure(
    notes: int, dump: Path, work: Path, pythonpath: str | None
) -> tuple[float, float, float, float]:
    """(import notes/s, its RSS, export notes/s, its RSS) of the CLI at ``pythonpath``
    (None: this checkout), against a fresh Redis."""
    cli = [sys.executable, "-m", "blackboard_mcp.cli"]
    with embedded_redis(work / "redis") as server:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("BB_")},
            "BB_REDIS_URL": server.url,
            "BB_DATA_DIR": str(work / "data"),
            "BB_LOG_LEVEL": "WARNING",
        }
        if pythonpath is not None:
            # `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH.
            env["PYTHONPATH"] = pythonpath
        cwd = pythonpath or str(work)
        imp_s, imp_rss, imp_out = timed([*cli, "import", str(dump)], env, cwd)
        out = work / "out.jsonl"
        exp_s, exp_rss, _ = timed(
            [*cli, "export", "--workspace", WORKSPACE, "--out", str(out)], env, cwd
        )
        exported = sum(1 for _ in out.open(encoding="utf-8")) - 1
        if exported != notes or f"imported {notes} notes" not in imp_out:
            raise SystemExit(f"{notes} notes: imported {imp_out!r}, exported {exported}")
    return notes / imp_s, imp_rss, notes / exp_s, exp_rss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", default="25000,100000")
    parser.add_argument("--against", help="also the CLI of this git revision")
    args = parser.parse_args()
    sizes = [int(n) for n in args.notes.split(",")]
    rows: list[tuple[str, int, float, float, float, float, float]] = []
    with revisions([args.against] if args.against else []) as trees:
        for notes in sizes:
            for label, tree in trees:
                with scratch("bench-transfer-") as work:
                    dump = work / "in.jsonl"
                    write_export(dump, notes)
                    figures = measure(notes, dump, work, None if tree is None else str(tree))
                    rows.append((label, notes, dump.stat().st_size / 2**20, *figures))
    print(
        f"{'CLI':<16}{'notes':>8}{'file MiB':>10}{'import/s':>10}{'RSS MiB':>9}"
        f"{'export/s':>10}{'RSS MiB':>9}"
    )
    for label, notes, mib, imp, imp_rss, exp, exp_rss in rows:
        print(
            f"{label:<16}{notes:>8}{mib:>10.0f}{imp:>10.0f}{imp_rss:>9.0f}{exp:>10.0f}"
            f"{exp_rss:>9.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
