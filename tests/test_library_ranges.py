"""The libraries used beyond their documented API are installed at releases their adapter
was tested against, and pyproject.toml allows no other.

Each such library is touched from one adapter module with a ``TESTED`` range. A release
outside that range may have moved what the adapter uses, so these tests fail first, with
the range, rather than the store or the gateway failing somewhere deep.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from blackboard_mcp import _uvicorn_adapter
from blackboard_mcp.gateway import _mcp_sdk_adapter
from blackboard_mcp.store.connection import _redis_py_adapter

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS: dict[str, ModuleType] = {
    "redis": _redis_py_adapter,
    "uvicorn": _uvicorn_adapter,
    "mcp": _mcp_sdk_adapter,
}


def _declared() -> dict[str, SpecifierSet]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(spec) for spec in project["dependencies"]]
    return {canonicalize_name(r.name): r.specifier for r in requirements}


@pytest.mark.parametrize("library", list(ADAPTERS))
def test_pyproject_allows_only_the_releases_the_adapter_was_tested_with(library: str) -> None:
    adapter = ADAPTERS[library]
    assert _declared()[library] == SpecifierSet(adapter.TESTED), (
        f"pyproject.toml's {library} range must be the one {adapter.__name__} was tested "
        f"with ({adapter.TESTED}): widen both together, after the suite passed"
    )


@pytest.mark.parametrize("library", list(ADAPTERS))
def test_the_installed_release_is_within_the_tested_range(library: str) -> None:
    adapter = ADAPTERS[library]
    installed = importlib.metadata.version(library)
    assert SpecifierSet(adapter.TESTED).contains(installed, prereleases=True), (
        f"{library} {installed} is installed, but {adapter.__name__} was tested with "
        f"{library}{adapter.TESTED} only: install a release in that range "
        f"(pip install '{library}{adapter.TESTED}'), or test the adapter on {installed} "
        "and move its TESTED range and pyproject.toml's together"
    )


def test_every_exact_pin_of_pyproject_is_the_installed_release() -> None:
    # An exact pin says the code depends on that release; nothing else is held here, so a
    # new release of any library the ranges allow cannot turn this red.
    for name, specifier in _declared().items():
        exact = [s.version for s in specifier if s.operator == "=="]
        if exact:
            assert importlib.metadata.version(name) == exact[0], name


# Modules without a leading underscore that their library still does not document: uvicorn's
# worker supervisor and protocol classes, redis-py's slot hash, the SDK's inbound checks.
UNDOCUMENTED = ("uvicorn.supervisors", "uvicorn.protocols", "redis.crc", "mcp.shared.inbound")


def test_no_other_module_imports_a_private_module_of_another_library() -> None:
    offenders = []
    for path in (ROOT / "blackboard_mcp").rglob("*.py"):
        if path.name.endswith("_adapter.py"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            words = line.split()
            if len(words) >= 2 and words[0] in ("from", "import"):
                module = words[1]
                private = "._" in module or module.startswith(UNDOCUMENTED)
                if not module.startswith((".", "blackboard_mcp")) and private:
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == [], "import another library's private module only in its adapter"
