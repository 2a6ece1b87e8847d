"""The settings become objects in one place (blackboard_mcp/_composition.py): `serve`'s gateway
and an operator's command build their board from the same settings alike, and auth is handed
plain values read from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from blackboard_mcp import _composition
from blackboard_mcp._cli._board import open_board as command_board
from blackboard_mcp.settings import Settings
from blackboard_mcp.store import Board

SECRET = "a secret of the variable, at least 32 bytes long"


@pytest.fixture
def board_openings(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every ``Board.from_url`` from here on (the boards are real)."""
    openings: list[dict[str, Any]] = []
    real = Board.from_url

    def recorded(url: str, **options: Any) -> Board:
        openings.append(options)
        return real(url, **options)

    monkeypatch.setattr(Board, "from_url", recorded)
    return openings


def _settings(redis_url: str, tmp_path: Path) -> Settings:
    return Settings(
        redis_url=redis_url,
        redis_cluster="off",
        redis_pool_size=3,
        redis_pool_timeout=0.25,
        redis_timeout_seconds=7.0,
        offload_bytes=4096,
        history_versions=5,
        jwt_secret=SecretStr(SECRET),
        data_dir=tmp_path,
    )


async def test_a_command_opens_its_board_with_the_pool_size_wait_and_timeout_set(
    redis_url: str, tmp_path: Path, board_openings: list[dict[str, Any]]
) -> None:
    settings = _settings(redis_url, tmp_path)
    async with command_board(settings):
        pass
    [options] = board_openings
    assert options["pool_size"] == 3
    assert options["pool_wait_seconds"] == 0.25
    assert options["timeout_seconds"] == 7.0
    assert options["cluster"] == "off"
    assert options["limits"].offload_bytes == 4096
    assert options["limits"].history_versions == 5


async def test_serve_and_a_command_open_the_board_with_the_same_options(
    redis_url: str, tmp_path: Path, board_openings: list[dict[str, Any]]
) -> None:
    settings = _settings(redis_url, tmp_path)
    parts = _composition.gateway_parts(settings)
    await parts.board.close()
    async with command_board(settings):
        pass
    served, commanded = board_openings
    assert served == commanded


def test_the_secret_file_wins_over_the_secret_variable(tmp_path: Path) -> None:
    secret_file = tmp_path / "jwt_secret"
    secret_file.write_text("the file's secret, also at least 32 bytes long\n")
    settings = Settings(jwt_secret=SecretStr(SECRET), jwt_secret_file=secret_file)
    signing, keys = _composition.signing_keys(settings)
    assert signing is not None
    assert signing.key == "the file's secret, also at least 32 bytes long"
    assert keys.for_kid(signing.kid) == ("HS256", signing.key)


def test_no_external_issuer_gives_no_external_tokens() -> None:
    assert _composition.external_tokens(Settings(), resource="https://b.example/mcp/") is None
