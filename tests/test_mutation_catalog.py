"""The mutation check's catalog still fits the code: each snippet is found once, each test exists.

The code changes under the catalog; this fails in the ordinary test run, naming the mutation
to update, rather than only when the slower mutation check runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "mutations"))

from catalog import MUTATIONS, Mutation  # noqa: E402
from run import stale  # noqa: E402


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_each_mutation_snippet_occurs_once_and_its_tests_exist(mutation: Mutation) -> None:
    assert stale((mutation,)) == [], "update tests/mutations/catalog.py"
    for test in mutation.tests:
        assert (ROOT / test.split("::")[0]).is_file(), test


def test_mutation_names_are_unique() -> None:
    names = [m.name for m in MUTATIONS]
    assert len(names) == len(set(names))
