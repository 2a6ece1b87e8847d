"""The README's first screen gives exactly two commands, and CI runs those two as written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
CI = ROOT / ".ci" / "run"


def _first_screen() -> str:
    return README.split("\n---\n", 1)[0]


def _commands(text: str) -> list[str]:
    return [line[4:] for line in text.splitlines() if re.match(r"^    \S", line)]


def test_the_first_screen_gives_a_serve_command_and_a_test_command_and_nothing_else() -> None:
    serve, tests = _commands(_first_screen())
    assert serve == 'pip install -e ".[embedded]" && blackboard-mcp serve'
    assert tests == 'pip install -e ".[embedded,test]" && python -m pytest'


def test_ci_reads_the_same_two_commands_out_of_the_readme() -> None:
    # Run the very line .ci/run uses to find them, from the repository's root.
    line = next(line for line in CI.read_text().splitlines() if line.startswith("mapfile"))
    script = f"{line}\nprintf '%s\\n' \"${{commands[@]}}\""
    found = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert found == _commands(_first_screen())


def test_ci_runs_the_serve_command_then_the_test_command_without_a_constraints_file() -> None:
    text = CI.read_text()
    assert 'bash -c "$serve_command"' in text
    assert 'bash -c "$test_command"' in text
    assert text.index('$serve_command"') < text.index('bash -c "$test_command"')
    assert "constraints" not in re.sub(r"#.*", "", text)


def test_the_readme_says_how_long_the_suite_takes_and_gives_a_quick_subset() -> None:
    assert re.search(r"takes about \d+ minutes", README)
    assert "python -m pytest -m quick" in README
