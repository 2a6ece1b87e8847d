"""source_path stays under BB_SOURCE_ROOT while an attacker swaps directories, links and FIFOs.

Each test runs a real thread that keeps renaming things under the root (renameat2 with
RENAME_EXCHANGE, an atomic swap, where libc offers it; a rename loop otherwise) while
update_state(source_path=...) is called over and over, and checks every answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from support import GatewayProcess, agent_token, call, mcp_client, start_gateway, stop_gateway

from blackboard_mcp.store import Board, GetState, StoreError, Unavailable, UpdateState
from blackboard_mcp.store.sources._source_reader import SourceReader

if TYPE_CHECKING:
    from blackboard_mcp.auth import TokenIssuer
    from blackboard_mcp.store import EmbeddedRedis

OUTSIDE_MARK = "OUTSIDE-" + uuid.uuid4().hex
INSIDE_TEXT = "# Inside\nthis file is under the root\n"
SWAP_SECONDS = 4.0
AT_FDCWD = -100
RENAME_EXCHANGE = 2


def _renameat2() -> Any | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return function


def _exchange(a: Path, b: Path) -> None:
    """Swap two names atomically; a three-rename loop where renameat2 is missing."""
    function = _renameat2()
    if function is not None:
        if function(AT_FDCWD, bytes(a), AT_FDCWD, bytes(b), RENAME_EXCHANGE) == 0:
            return
        if ctypes.get_errno() not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(ctypes.get_errno(), "renameat2")
    spare = a.with_name(a.name + ".swap")
    os.rename(a, spare)
    os.rename(b, a)
    os.rename(spare, b)


@contextlib.contextmanager
def swapping(a: Path, b: Path) -> Iterator[list[int]]:
    """Keep exchanging ``a`` and ``b`` until the block ends; yields a one-item swap counter."""
    stop = threading.Event()
    count = [0]

    def run() -> None:
        while not stop.is_set():
            _exchange(a, b)
            count[0] += 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield count
    finally:
        stop.set()
        thread.join(timeout=5)


def plant_race(root: Path, outside: Path) -> tuple[Path, Path]:
    """race/d is a real directory holding secret.txt; race/link points at a directory outside."""
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_text(f"{OUTSIDE_MARK}\n")
    race = root / "race"
    (race / "d").mkdir(parents=True)
    (race / "d" / "secret.txt").write_text(INSIDE_TEXT)
    (race / "link").symlink_to(outside, target_is_directory=True)
    return race / "d", race / "link"


async def test_swapped_directory_symlink_never_lets_an_outside_file_in(
    board: Board, source_root: Path, tmp_path: Path
) -> None:
    directory, link = plant_race(source_root, tmp_path / "outside")
    stored: list[str] = []
    refusals: dict[str, int] = {}
    with swapping(directory, link) as swaps:
        deadline = time.monotonic() + SWAP_SECONDS
        n = 0
        while time.monotonic() < deadline:
            n += 1
            uri = f"bb://ws/race/n{n}"
            try:
                await board.update_state(
                    UpdateState.parse(
                        {"uri": uri, "digest": "race", "source_path": "race/d/secret.txt"}
                    ),
                    author="a",
                )
            except StoreError as exc:
                refusals[exc.code] = refusals.get(exc.code, 0) + 1
                continue
            answer = await board.get_state(GetState.parse({"uris": [uri], "mode": "full"}))
            stored.append(str(answer))
    assert swaps[0] > 100, "the swapping thread did not run"
    assert n > 100
    assert not [s for s in stored if OUTSIDE_MARK in s], f"{len(stored)} notes, some from outside"
    assert "internal" not in refusals
    assert stored, "no call got through: the test proves nothing"


@pytest.fixture(scope="module")
def own_gateway(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """A gateway of this module's own: a hung event loop here must not stall the others."""
    if not redis_server.running:
        redis_server.start()
    process = start_gateway(
        redis_server.url,
        tmp_path_factory.mktemp("confined-gateway"),
        extra_env={"BB_SOURCE_READ_TIMEOUT_SECONDS": "2"},
    )
    yield process
    stop_gateway(process)


def gateway_root(gateway: GatewayProcess) -> Path:
    return gateway.log_path.parent / "sources"


async def test_swap_race_through_the_gateway_gives_no_outside_note_and_no_internal(
    own_gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, tmp_path: Path
) -> None:
    root = gateway_root(own_gateway) / uuid.uuid4().hex[:8]
    root.mkdir()
    directory, link = plant_race(root, tmp_path / "outside")
    relative = f"{root.name}/race/d/secret.txt"
    token = agent_token(issuer, workspace)
    codes: dict[str, int] = {}
    leaked = ok = 0
    async with mcp_client(own_gateway.mcp_url, token) as client:
        with swapping(directory, link) as swaps:
            deadline = time.monotonic() + SWAP_SECONDS
            n = 0
            while time.monotonic() < deadline:
                n += 1
                uri = f"bb://{workspace}/race/n{n}"
                is_error, body = await call(
                    client, "update_state", uri=uri, digest="race", source_path=relative
                )
                if is_error:
                    code = body["error"]["code"]
                    codes[code] = codes.get(code, 0) + 1
                    continue
                ok += 1
                _, got = await call(client, "get_state", uris=[uri], mode="full")
                leaked += OUTSIDE_MARK in str(got)
    assert swaps[0] > 100
    assert leaked == 0, f"{leaked} of {ok} notes hold the outside file"
    assert "internal" not in codes, codes
    assert ok > 0 and sum(codes.values()) > 0, (ok, codes)


def _healthz_watch(url: str, stop: threading.Event, slowest: list[float]) -> None:
    with httpx.Client(timeout=5.0) as http:
        while not stop.is_set():
            started = time.monotonic()
            try:
                status = http.get(url + "/healthz").status_code
            except httpx.HTTPError:
                status = 0
            took = time.monotonic() - started
            slowest[0] = max(slowest[0], took if status == 200 else 99.0)
            time.sleep(0.05)


async def test_fifo_is_refused_and_the_gateway_keeps_answering(
    own_gateway: GatewayProcess, issuer: TokenIssuer, workspace: str
) -> None:
    root = gateway_root(own_gateway) / uuid.uuid4().hex[:8]
    root.mkdir()
    os.mkfifo(root / "pipe.txt")
    (root / "plain.txt").write_text(INSIDE_TEXT)
    os.mkfifo(root / "swap.txt")
    token = agent_token(issuer, workspace)
    stop, slowest = threading.Event(), [0.0]
    watcher = threading.Thread(target=_healthz_watch, args=(own_gateway.url, stop, slowest))
    watcher.start()
    codes: dict[str, int] = {}
    try:
        async with mcp_client(own_gateway.mcp_url, token) as client:
            is_error, body = await call(
                client,
                "update_state",
                uri=f"bb://{workspace}/t/fifo",
                digest="fifo",
                source_path=f"{root.name}/pipe.txt",
            )
            assert is_error and body["error"]["code"] == "invalid_argument", body
            assert "not a regular file" in body["error"]["message"]
            # Now a FIFO and a file keep trading places under one name.
            with swapping(root / "swap.txt", root / "plain.txt") as swaps:
                deadline = time.monotonic() + SWAP_SECONDS
                n = 0
                while time.monotonic() < deadline:
                    n += 1
                    is_error, body = await call(
                        client,
                        "update_state",
                        uri=f"bb://{workspace}/t/swap{n}",
                        digest="swap",
                        source_path=f"{root.name}/swap.txt",
                    )
                    code = body["error"]["code"] if is_error else "ok"
                    codes[code] = codes.get(code, 0) + 1
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert swaps[0] > 100
    assert slowest[0] < 1.0, f"/healthz took {slowest[0]:.1f} s at worst"
    assert set(codes) <= {"ok", "invalid_argument", "not_found"}, codes
    assert codes.get("invalid_argument", 0) > 0, codes


async def test_a_read_past_the_deadline_answers_unavailable_and_frees_its_thread_later(
    tmp_path: Path,
) -> None:
    # A real slow read: summarising a few megabytes of text takes far longer than 20 ms.
    (tmp_path / "big.txt").write_text("an event that happened\n" * 200_000)
    (tmp_path / "small.txt").write_text(INSIDE_TEXT)
    reader = SourceReader(
        root=tmp_path, max_bytes=10 * 1024 * 1024, timeout_seconds=0.02, max_threads=1
    )
    try:
        with pytest.raises(Unavailable) as overdue:
            await reader.summarize("big.txt")
        assert overdue.value.message == "reading source_path took longer than 0.02 s"
        # Its one thread is still busy: the next call waits for it, within its own deadline.
        with pytest.raises(Unavailable):
            await reader.summarize("small.txt")
        deadline = time.monotonic() + 10
        while True:
            try:
                summary = await reader.summarize("small.txt")
                break
            except Unavailable:
                assert time.monotonic() < deadline, "the thread never came back"
                await asyncio.sleep(0.05)
        assert summary.relative_path == "small.txt"
    finally:
        reader.close()
