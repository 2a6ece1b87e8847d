"""The code stays as the style guide has it: ruff clean and formatted, mypy strict clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_finds_nothing_in_the_package_tests_and_benchmarks() -> None:
    result = _run("ruff", "check", "blackboard_mcp", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_formatting_is_applied_everywhere() -> None:
    result = _run("ruff", "format", "--check", "blackboard_mcp", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_strict_is_clean_on_the_package() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
