"""Break the code on purpose, one named way at a time, and report which breakages no test noticed.

    python tests/mutations/run.py            # every mutation of catalog.py
    python tests/mutations/run.py --list     # names only
    python tests/mutations/run.py --only watch-removed --only revocation-ignored

Each mutation is applied to its own copy of the repository, never to the checkout itself, and
that copy's tests run against that copy's code (PYTHONPATH puts it ahead of any installed
package, and the gateway processes the tests start inherit it). First the unmutated copy must
pass every test the mutations use; a mutation is killed when its tests then fail (pytest exit
status 1) and survives when they pass. Exit status: 0 when every mutation was killed, 1 when one
survived or its run broke, 2 when a snippet no longer matches the code or the baseline fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from catalog import MUTATIONS, Mutation

ROOT = Path(__file__).resolve().parents[2]
CATALOG = "tests/mutations/catalog.py"
# What a copy leaves out: environments, caches and build output are not the code under test.
_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    "*.egg-info",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "build",
    "dist",
)


@dataclass(frozen=True)
class Outcome:
    name: str
    verdict: str  # killed, survived, broken (pytest could not run the tests), timeout
    seconds: float
    detail: str = ""


def stale(mutations: tuple[Mutation, ...]) -> list[str]:
    """Every mutation whose snippet does not occur exactly once in its file, with the reason."""
    problems = []
    for m in mutations:
        path = ROOT / m.path
        if not path.is_file():
            problems.append(f"{m.name}: {m.path} does not exist")
            continue
        count = path.read_text().count(m.original)
        if count != 1:
            where = "is not in" if count == 0 else f"occurs {count} times in"
            problems.append(f"{m.name}: the snippet {m.original!r} {where} {m.path}")
    return problems


def make_copy(parent: Path, label: str) -> Path:
    copy = parent / label
    shutil.copytree(ROOT, copy, ignore=_IGNORE, symlinks=True)
    return copy


def environment(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(copy), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_imports_from(copy: Path) -> None:
    found = subprocess.run(
        [sys.executable, "-c", "import blackboard_mcp; print(blackboard_mcp.__file__)"],
        cwd=copy,
        env=environment(copy),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(f"the copy's tests would import blackboard_mcp from {found}, not the copy")


def run_tests(copy: Path, tests: tuple[str, ...], timeout: float) -> tuple[int | None, str]:
    """pytest's exit status (None on timeout) and the tail of its output."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        # In one process: a handful of tests gains nothing from the suite's workers, and would
        # pay for starting them once per mutation.
        "-n",
        "0",
        "--hypothesis-profile=mutations",
        *tests,
    ]
    try:
        done = subprocess.run(
            command,
            cwd=copy,
            env=environment(copy),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        return None, out[-2000:]
    return done.returncode, (done.stdout + done.stderr)[-2000:]


def first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED", "ERROR")):
            return line[:160]
    return ""


def try_mutation(parent: Path, m: Mutation, timeout: float) -> Outcome:
    copy = make_copy(parent, m.name)
    target = copy / m.path
    target.write_text(target.read_text().replace(m.original, m.replacement, 1))
    started = time.monotonic()
    status, output = run_tests(copy, m.tests, timeout)
    seconds = time.monotonic() - started
    shutil.rmtree(copy, ignore_errors=True)
    if status is None:
        # A hang is noticed too, but a slow way to notice: say so.
        return Outcome(m.name, "timeout", seconds, f"no verdict within {timeout:.0f} s")
    if status == 1:
        return Outcome(m.name, "killed", seconds, first_failure(output))
    if status == 0:
        return Outcome(m.name, "survived", seconds, m.why)
    return Outcome(m.name, "broken", seconds, f"pytest exit {status}: {output[-600:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list", action="store_true", help="print the mutations and exit")
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per pytest run")
    parser.add_argument(
        "--tests", nargs="+", metavar="ARG", help="run these pytest arguments instead of the listed"
    )
    args = parser.parse_args(argv)

    chosen = tuple(m for m in MUTATIONS if not args.only or m.name in args.only)
    if args.tests:
        chosen = tuple(replace(m, tests=tuple(args.tests)) for m in chosen)
    unknown = set(args.only) - {m.name for m in MUTATIONS}
    if unknown:
        parser.error(f"no mutation named {', '.join(sorted(unknown))}")
    if args.list:
        for m in chosen:
            print(f"{m.name:42} {m.path}: {m.why}")
        return 0
    problems = stale(chosen)
    if problems:
        print(
            "MUTATION SNIPPETS NO LONGER MATCH THE CODE: update them in " + CATALOG, file=sys.stderr
        )
        for problem in problems:
            print("  " + problem, file=sys.stderr)
        return 2

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bb-mutations-") as tmp:
        parent = Path(tmp)
        if not args.no_baseline:
            copy = make_copy(parent, "baseline")
            check_imports_from(copy)
            tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
            t0 = time.monotonic()
            status, output = run_tests(copy, tests, args.timeout)
            print(f"baseline (no mutation): exit {status} in {time.monotonic() - t0:.0f} s")
            if status != 0:
                print(output, file=sys.stderr)
                print("the unmutated code fails its own tests: fix that first", file=sys.stderr)
                return 2
            shutil.rmtree(copy, ignore_errors=True)
        outcomes = []
        for m in chosen:
            outcome = try_mutation(parent, m, args.timeout)
            outcomes.append(outcome)
            print(f"{outcome.verdict:9} {outcome.seconds:6.1f} s  {m.name}  {outcome.detail}")
            sys.stdout.flush()
    total = time.monotonic() - started
    bad = [o for o in outcomes if o.verdict in ("survived", "broken")]
    print(
        f"{len(outcomes)} mutations: {sum(o.verdict == 'killed' for o in outcomes)} killed, "
        f"{sum(o.verdict == 'timeout' for o in outcomes)} by timeout, "
        f"{sum(o.verdict == 'survived' for o in outcomes)} survived, "
        f"{sum(o.verdict == 'broken' for o in outcomes)} broken; {total:.0f} s in all"
    )
    for o in bad:
        print(f"  {o.verdict.upper()}: {o.name}: {o.detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
