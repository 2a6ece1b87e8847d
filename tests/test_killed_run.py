"""A test run that is killed leaves no process behind.

The servers a test starts (gateways, `serve` with its embedded Redis and workers, a Redis of
its own) are forked with a parent-death signal: when pytest dies, however it dies, the
kernel sends them SIGTERM, and `serve` stops its own children in turn.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from serve_support import alive, children, wait_gone
from support import child_process

TESTS = Path(__file__).resolve().parent

INNER = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    from serve_support import start_serve


    def test_holds_a_serve_until_killed(tmp_path):
        serve = start_serve(tmp_path / "data")
        Path(os.environ["PID_FILE"]).write_text(str(serve.process.pid))
        time.sleep(600)  # until the outer test kills this run
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_pytest_leaves_no_serve_redis_or_worker_behind(
    tmp_path: Path, sig: signal.Signals
) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    pid_file = tmp_path / "serve.pid"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "PID_FILE": str(pid_file),
    }
    inner = child_process(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), str(tmp_path / "test_inner.py")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline_polls = 0
        while not pid_file.exists() or not pid_file.read_text():
            assert inner.poll() is None, "the inner run ended before its serve was up"
            deadline_polls += 1
            assert deadline_polls < 1200, "the inner run's serve did not start in 120 s"
            wait_gone(inner.pid, timeout=0.1)
        serve_pid = int(pid_file.read_text())
        redis = children(serve_pid, "redis-server")
        workers = children(serve_pid, "python")
        assert redis, "serve runs an embedded Redis"
        inner.send_signal(sig)
        inner.wait(timeout=30)
        for pid in [serve_pid, *redis, *workers]:
            assert wait_gone(pid, timeout=30), f"process {pid} outlived the killed test run"
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait()
    assert not alive(serve_pid)


def test_a_test_s_child_hears_ctrl_c_even_when_the_suite_was_started_ignoring_it() -> None:
    """A suite started in the background of a shell (`cmd &`, nohup) inherits SIGINT ignored,
    and so would every process it starts: the CLI tests that stop a command with SIGINT then
    waited forever (`audit tail --follow`) or saw it finish (`import`)."""
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        child = child_process([sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    out, _ = child.communicate(timeout=60)
    assert out.strip() == "True"
