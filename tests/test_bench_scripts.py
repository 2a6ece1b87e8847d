"""The benchmarks run from the bench folder and the installed package alone: none of them
needs the test tree (a clean checkout's bench/, or a copy of it, is enough)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from blackboard_mcp.testing import GatewayDidNotStart, start_gateway

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bench_script_starts_without_the_test_tree(script: str, tmp_path: Path) -> None:
    copy = tmp_path / "bench"
    shutil.copytree(BENCH, copy, ignore=shutil.ignore_patterns("plots", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, str(copy / script), "--help"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def test_a_gateway_started_for_another_revision_runs_that_revisions_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As `cas_load.py --against REV` does, from the repository's root: the other revision's
    # package must be what runs, not the checkout's (python -m puts the working directory
    # ahead of PYTHONPATH). This one's CLI leaves a mark and exits at once.
    monkeypatch.chdir(BENCH.parent)
    tree = tmp_path / "other"
    shutil.copytree(
        BENCH.parent / "blackboard_mcp",
        tree / "blackboard_mcp",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    mark = tmp_path / "ran"
    (tree / "blackboard_mcp" / "cli.py").write_text(
        f"import pathlib, sys\npathlib.Path({str(mark)!r}).write_text('other')\nsys.exit(3)\n"
    )
    with pytest.raises(GatewayDidNotStart, match="exited during start"):
        start_gateway("redis://127.0.0.1:1/0", package_root=tree)
    assert mark.read_text() == "other"
