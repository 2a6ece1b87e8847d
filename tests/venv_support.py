"""A Python environment of a test's own, installed from its pinned requirements.

An agent framework's MCP client may need another ``mcp`` than the server's (LangChain's adapters
still speak mcp 1.x), so each framework runs in a virtualenv of its own under
``tests/frameworks/<name>/.venv``, made from ``tests/frameworks/<name>/requirements.txt`` (exact
pins). It is reinstalled only when the pins change: a stamp beside it holds their digest. The
run starts the installs its framework tests need in the background as soon as it has collected
them (tests/conftest.py), so they overlap the other tests. As with the npm clients, a failed
install fails the test on CI and skips it elsewhere.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import NoReturn

import pytest
from support import GatewayProcess

FRAMEWORKS_DIR = Path(__file__).parent / "frameworks"
INSTALL_TIMEOUT_SECONDS = 900
_STAMP = "requirements.sha256"


def _install_failed(name: str, reason: str) -> NoReturn:
    where = f"tests/frameworks/{name}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"installing {where}/requirements.txt failed: {reason}")
    gist = "; ".join(line.strip() for line in reason.strip().splitlines()[-3:])
    pytest.skip(f"installing {where}/requirements.txt failed (no network?): {gist}")


def pinned_versions(name: str) -> dict[str, str]:
    """What ``requirements.txt`` pins, by distribution name (every line is ``name==version``)."""
    pins: dict[str, str] = {}
    for line in (FRAMEWORKS_DIR / name / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        distribution, sep, version = line.partition("==")
        assert sep, f"tests/frameworks/{name}/requirements.txt: {line!r} is not pinned with =="
        pins[distribution.split("[", 1)[0].strip().lower()] = version.strip()
    return pins


def framework_python(name: str) -> Path:
    """The interpreter of ``tests/frameworks/<name>/.venv``, installed if its pins changed
    (or waited for, when ``install_in_background`` started its install)."""
    pending = _installs.get(name)
    failure = pending.result() if pending is not None else _install(name)
    if failure is not None:
        _install_failed(name, failure)
    return FRAMEWORKS_DIR / name / ".venv" / "bin" / "python"


def install_in_background(names: Iterable[str]) -> None:
    """Start installing the environments of ``names`` now, a few at a time, so that they are
    ready (or their failure known) when a test first asks ``framework_python`` for one."""
    for name in sorted(set(names) - _installs.keys()):
        if (FRAMEWORKS_DIR / name / "requirements.txt").is_file():
            pending: Future[str | None] = Future()
            _installs[name] = pending
            threading.Thread(
                target=_install_into, args=(name, pending), name=f"install-{name}"
            ).start()


def finish_installs() -> None:
    """Wait for the installs started here: a process that ends first (a worker out of tests,
    a run stopped by -x) would otherwise leave one half made, its lock freed for another."""
    for pending in _installs.values():
        pending.exception()


_installs: dict[str, Future[str | None]] = {}
# Installs at once: each is mostly download and unpacking, two cores are shared with the tests.
_install_slots = threading.Semaphore(3)


def _install_into(name: str, pending: Future[str | None]) -> None:
    with _install_slots:
        try:
            pending.set_result(_install(name))
        except BaseException as exc:
            pending.set_exception(exc)


def _install(name: str) -> str | None:
    """Install ``tests/frameworks/<name>/.venv`` unless its stamp matches the pins; None when
    it is ready, else why it could not be made."""
    folder = FRAMEWORKS_DIR / name
    requirements = folder / "requirements.txt"
    venv = folder / ".venv"
    python = venv / "bin" / "python"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    stamp = venv / _STAMP
    with open(folder / ".install.lock", "w") as lock:
        # Two pytest processes on one checkout must not build the same environment at once.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.is_file() and stamp.is_file() and stamp.read_text() == digest:
            return None
        shutil.rmtree(venv, ignore_errors=True)
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
             "-r", str(requirements)],
        ]  # fmt: skip
        for step in steps:
            try:
                done = subprocess.run(
                    step,
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_TIMEOUT_SECONDS,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return f"no result after {INSTALL_TIMEOUT_SECONDS} s"
            if done.returncode != 0:
                return done.stderr[-2000:] or f"exit {done.returncode}"
        stamp.write_text(digest)
    return None


def installed_versions(python: Path, names: list[str]) -> dict[str, str]:
    """The versions ``python``'s environment holds of ``names`` (distribution names)."""
    script = (
        "import json, sys\n"
        "from importlib.metadata import version\n"
        "print(json.dumps({n: version(n) for n in sys.argv[1:]}))\n"
    )
    done = subprocess.run(
        [str(python), "-c", script, *names], capture_output=True, text=True, check=True
    )
    found: dict[str, str] = json.loads(done.stdout)
    return {n.lower(): v for n, v in found.items()}


def run_readme_session(
    python: Path,
    name: str,
    *,
    heading: str,
    gateway: GatewayProcess,
    workspace: str,
    tokens: dict[str, str],
    folder: Path,
    extra_env: dict[str, str] | None = None,
    timeout_seconds: int = 120,
) -> subprocess.CompletedProcess[str]:
    """``tests/frameworks/<name>/session.py`` run on the README entry ``heading``'s Python
    block, pointed at ``gateway``, with ``tokens`` in its environment (never in its output)."""
    # Read here, not at import: the README helpers live with the client setups' tests.
    from test_client_setups import PLACEHOLDER_URL, fenced, readme_entry

    snippet = fenced(readme_entry(heading), "python")
    assert snippet.count(PLACEHOLDER_URL) == 1
    path = folder / "board_agent.py"
    path.write_text(snippet.replace(PLACEHOLDER_URL, gateway.mcp_url))
    done = subprocess.run(
        [str(python), str(FRAMEWORKS_DIR / name / "session.py"), str(path), workspace],
        env={**os.environ, **tokens, **(extra_env or {})},
        capture_output=True,
        text=True,
        timeout=timeout_seconds,
        check=False,
    )
    assert done.returncode == 0, f"{done.stderr[-4000:]}\ngateway log: {gateway.log_text()[-2000:]}"
    for token in tokens.values():
        assert token not in done.stdout + done.stderr
    return done
