"""Installing a test's npm packages from its committed lockfile, shared by the Node client tests."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest


def locked_versions(package_dir: Path) -> dict[str, str]:
    """The exact versions package.json pins, by package name."""
    manifest = json.loads((package_dir / "package.json").read_text())
    return {**manifest["dependencies"]}


def installed_version(package_dir: Path, name: str) -> str | None:
    manifest = package_dir / "node_modules" / name / "package.json"
    if not manifest.is_file():
        return None
    return str(json.loads(manifest.read_text())["version"])


def up_to_date(package_dir: Path) -> bool:
    return all(
        installed_version(package_dir, n) == v for n, v in locked_versions(package_dir).items()
    )


def install_failed(package_dir: Path, reason: str) -> NoReturn:
    # On CI a missing client is a broken build, not a reason to go green without these tests.
    where = f"tests/{package_dir.name}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"npm ci in {where} failed: {reason}")
    # npm's first lines name the cause (ECONNREFUSED, ENOTFOUND, ...); the rest is log noise.
    gist = "; ".join(line.strip() for line in reason.splitlines()[:3])
    pytest.skip(f"npm ci in {where} failed (no network?): {gist}")


def npm_ci(npm: str, package_dir: Path, timeout_seconds: int) -> None:
    """``npm ci`` unless node_modules already holds the pinned versions.

    A version check rather than a bare existence check, so a bumped pin reinstalls instead
    of silently testing the version left over from an earlier checkout.
    """
    if up_to_date(package_dir):
        return
    try:
        completed = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=package_dir,
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
            check=False,
        )
    except subprocess.TimeoutExpired:
        install_failed(package_dir, f"no result after {timeout_seconds} s")
    if completed.returncode != 0:
        install_failed(
            package_dir, completed.stderr.strip()[-2000:] or f"exit {completed.returncode}"
        )
    if not up_to_date(package_dir):
        install_failed(package_dir, "node_modules does not hold the versions package.json pins")


def installed_from_lockfile(package_dir: Path, purpose: str, timeout_seconds: int) -> Path:
    """``npm ci`` in ``package_dir``; its node_modules. Without npm on PATH the test fails on
    CI (which installs it) and is skipped elsewhere; ``purpose`` ends both messages."""
    npm = shutil.which("npm")
    if npm is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"npm is not on PATH; CI must run {purpose}")
        pytest.skip(f"npm is needed on PATH to install {purpose}")
    npm_ci(npm, package_dir, timeout_seconds)
    return package_dir / "node_modules"


def platform_suffix() -> str:
    """How the node-<platform> packages name this machine: linux-x64, darwin-arm64, ..."""
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
    return f"{sys.platform}-{machine.get(platform.machine().lower(), platform.machine())}"


def locked_node(package_dir: Path) -> str:
    """The Node binary of the node-<platform> package pinned in ``package_dir``."""
    node = package_dir / "node_modules" / f"node-{platform_suffix()}" / "bin" / "node"
    if not node.is_file():
        install_failed(package_dir, f"no node-{platform_suffix()} for this platform")
    return str(node)
