"""The code stays as the style guide has it: ruff clean and formatted, mypy strict clean."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
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


LINT_TOOLS = (
    "ruff",
    "mypy",
    "types-redis",
    "check-jsonschema",
    "kubernetes-validate",
    "helm-python-sdk",
)


def test_lint_tools_are_pinned_exactly_and_installed_at_their_pins() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["test"]
    pins = {}
    for requirement in extra:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==([^;\s]+)", requirement)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    for tool in LINT_TOOLS:
        assert tool in pins, f"{tool} is not pinned with == in the test extra"
        assert version(tool) == pins[tool], f"{tool} {version(tool)} installed, {pins[tool]} pinned"
