"""`serve` with its embedded Redis starts, stops, crashes and recovers without losing a note.

Real `serve` processes, real signals: a stop leaves no redis-server behind, one `serve` owns a
data dir, an embedded Redis that dies is restarted under a running gateway, and the one-time
admin token is printed only once the port is ours.
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_support import (
    alive,
    create_note,
    http_client,
    kill_leftovers,
    launch_serve,
    missing_notes,
    start_serve,
    stop,
    wait_gone,
    wait_ready,
)
from support import agent_token

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis, UpdateState, free_port

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _no_serve_left_behind() -> Iterator[None]:
    yield
    kill_leftovers()


JWT = re.compile(r"^[\w-]+\.[\w-]+\.[\w-]+$")


async def _create(mcp_url: str, token: str, uris: list[str]) -> None:
    async with http_client(token) as http:
        outcomes = [await create_note(http, mcp_url, uri) for uri in uris]
    assert outcomes == ["ok"] * len(uris)


async def _missing(mcp_url: str, token: str, uris: list[str]) -> list[str]:
    async with http_client(token) as http:
        return await missing_notes(http, mcp_url, uris)


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
)
async def test_a_signal_stops_serve_and_its_redis_cleanly_and_the_next_start_has_every_note(
    tmp_path: Path, issuer: TokenIssuer, workspace: str, sig: signal.Signals
) -> None:
    data = tmp_path / "data"
    token = agent_token(issuer, workspace)
    uris = [f"bb://{workspace}/life/n{i}" for i in range(20)]
    first = start_serve(data)
    try:
        (redis_pid,) = first.redis_pids()
        await _create(first.mcp_url, token, uris)
        code = stop(first, sig)
    finally:
        first.process.kill()
    assert code == 0, first.output()
    assert wait_gone(redis_pid, timeout=2.0), "redis-server outlived its serve"
    assert not (data / "redis.url").exists()
    # Redis shut down by itself (SHUTDOWN, AOF flushed), not killed.
    assert "ready to exit" in (data / "redis" / "redis.log").read_text()
    if sig != signal.SIGTERM:
        return  # the same clean stop; one restart-and-read is enough to hold the data

    second = start_serve(data, port=first.port)
    try:
        assert await _missing(second.mcp_url, token, uris) == []
    finally:
        stop(second, signal.SIGTERM)


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_sigkill_of_serve_takes_its_redis_along_and_the_next_start_has_every_note(
    tmp_path: Path, issuer: TokenIssuer, workspace: str, workers: int
) -> None:
    data = tmp_path / "data"
    token = agent_token(issuer, workspace)
    uris = [f"bb://{workspace}/life/k{i}" for i in range(20)]
    first = start_serve(data, workers=workers)
    (redis_pid,) = first.redis_pids()
    worker_pids = first.worker_pids()
    assert len(worker_pids) == (workers if workers > 1 else 0)
    await _create(first.mcp_url, token, uris)
    first.process.kill()
    first.process.wait()
    assert wait_gone(redis_pid, timeout=5.0), "redis-server outlived a SIGKILLed serve"
    for pid in worker_pids:
        assert wait_gone(pid, timeout=10.0), "a worker outlived a SIGKILLed serve"

    # The same port: nothing of the first one holds it any more.
    second = start_serve(data, port=first.port, workers=workers)
    try:
        assert await _missing(second.mcp_url, token, uris) == []
    finally:
        stop(second, signal.SIGTERM)


async def test_an_orphaned_redis_on_the_data_dir_is_stopped_before_serve_starts_its_own(
    tmp_path: Path, issuer: TokenIssuer, workspace: str
) -> None:
    """A Redis left running on the data dir (an older serve's, which had no parent-death
    signal) is stopped cleanly first: never two servers on one appendonlydir."""
    data = tmp_path / "data"
    orphan = EmbeddedRedis(data_dir=data / "redis").start()
    uri = f"bb://{workspace}/life/orphaned"
    from blackboard_mcp.store import Board

    board = Board.from_url(orphan.url)
    await board.start()
    await board.update_state(
        UpdateState.parse({"uri": uri, "digest": f"note {uri}", "body": uri, "expect_version": 0}),
        author="a",
    )
    await board.close()
    serve = start_serve(data)
    try:
        deadline = time.monotonic() + 5
        while orphan.exit_code() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert orphan.exit_code() == 0, "the orphan was not shut down cleanly"
        assert len(serve.redis_pids()) == 1
        assert await _missing(serve.mcp_url, agent_token(issuer, workspace), [uri]) == []
    finally:
        stop(serve, signal.SIGTERM)
        orphan.stop()


def test_a_second_serve_on_the_same_data_dir_exits_naming_the_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_serve(data)
    try:
        second = launch_serve(data)
        try:
            code = second.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            second.process.kill()
            second.process.wait()
            pytest.fail(f"a second serve ran on the same data dir: {second.output()}")
        lines = [line for line in second.output().splitlines() if line.strip()]
        assert code != 0
        assert len(lines) == 1 and str(data) in lines[0], lines
        assert "Traceback" not in second.output()
        # The first one is untouched, and still has one Redis.
        assert httpx.get(first.url + "/readyz").status_code == 200
        assert len(first.redis_pids()) == 1
    finally:
        stop(first, signal.SIGTERM)


async def test_the_embedded_redis_killed_under_load_is_restarted_and_loses_no_acknowledged_note(
    tmp_path: Path, issuer: TokenIssuer, workspace: str
) -> None:
    serve = start_serve(tmp_path / "data")
    token = agent_token(issuer, workspace)
    acked: list[str] = []
    killed_at: list[float] = []
    recovered_at: list[float] = []
    outcomes: set[str] = set()

    async def writer(http: httpx.AsyncClient, cid: int) -> None:
        # Write until five creates succeeded after the kill.
        i, after = 0, 0
        while after < 5:
            uri = f"bb://{workspace}/load/c{cid}-{i}"
            i += 1
            was_killed = bool(killed_at)
            outcome = await create_note(http, serve.mcp_url, uri)
            outcomes.add(outcome)
            if outcome == "ok":
                acked.append(uri)
                if was_killed:
                    after += 1
                    recovered_at.append(time.monotonic())
            else:
                assert outcome == "unavailable", outcome
                await asyncio.sleep(0.05)

    probes: list[tuple[int, int]] = []

    async def prober(http: httpx.AsyncClient) -> None:
        # /healthz and /readyz side by side, from the kill until the writers are done.
        while not recovered_at or len(recovered_at) < 20:
            health, ready = await asyncio.gather(
                http.get(serve.url + "/healthz"), http.get(serve.url + "/readyz")
            )
            probes.append((health.status_code, ready.status_code))
            await asyncio.sleep(0.02)

    try:
        (redis_pid,) = serve.redis_pids()
        async with asyncio.timeout(60), http_client(token) as http:
            async with asyncio.TaskGroup() as load:
                for cid in range(4):
                    load.create_task(writer(http, cid))
                while len(acked) < 40:
                    await asyncio.sleep(0.01)
                killed_at.append(time.monotonic())
                subprocess.run(["kill", "-9", str(redis_pid)], check=True)
                load.create_task(prober(http))
            assert "unavailable" in outcomes, "the kill was not seen by any call"
            # Alive throughout; not ready while Redis was down; ready again after.
            assert {health for health, _ in probes} == {200}, probes
            assert 503 in [ready for _, ready in probes], probes
            assert probes[-1][1] == 200, probes
            assert min(recovered_at) - killed_at[0] < 10.0
            assert serve.process.poll() is None, "serve itself was restarted or died"
            assert [pid for pid in serve.redis_pids() if pid != redis_pid], "no new redis-server"
            assert await missing_notes(http, serve.mcp_url, acked) == []
        assert httpx.get(serve.url + "/readyz").status_code == 200
        assert "restart" in serve.output()
    finally:
        stop(serve, signal.SIGTERM)


def test_serve_exits_non_zero_when_its_redis_cannot_be_restarted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    serve = start_serve(data, BB_EMBEDDED_RESTARTS="2")
    (redis_pid,) = serve.redis_pids()
    # A manifest Redis cannot parse: every restart fails the same way.
    (data / "redis" / "appendonlydir" / "appendonly.aof.manifest").write_text("garbage\n")
    subprocess.run(["kill", "-9", str(redis_pid)], check=True)
    try:
        code = serve.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        serve.process.kill()
        pytest.fail(f"serve kept running without its Redis: {serve.output()}")
    assert code == 5, serve.output()
    assert "gave up" in serve.output()
    assert "Traceback" not in serve.output()
    assert serve.redis_pids() == []


async def test_a_busy_port_on_first_start_prints_no_token_and_the_next_start_does(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    port = free_port()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        refused = launch_serve(data, port=port, jwt=False)
        code = refused.process.wait(timeout=30)
    output = refused.output()
    assert code == 3, output
    assert "Traceback" not in output
    assert not any(JWT.match(line) for line in output.splitlines()), output
    assert f"{port}" in output and "in use" in output
    assert not data.exists()  # neither the data dir nor its lock
    assert not list(data.glob("**/redis.pid")) or not alive(
        int((data / "redis" / "redis.pid").read_text())
    )

    served = launch_serve(data, port=port, jwt=False)
    try:
        wait_ready(served)
        lines = served.output().splitlines()
        tokens = [line for line in lines if JWT.match(line)]
        assert len(tokens) == 1, lines
        assert "blackboard-mcp token issue --admin --workspace default" in served.output()
        # The board page's address, beside the endpoint's.
        assert f"board page http://127.0.0.1:{port}/board" in served.output()
        async with http_client(tokens[0]) as http:
            outcome = await create_note(http, served.mcp_url, "bb://default/life/first")
        assert outcome == "ok"
    finally:
        stop(served, signal.SIGTERM)
