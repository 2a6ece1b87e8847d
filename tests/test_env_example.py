"""`.env.example` names every BB_* setting the code reads, each at its real default."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from blackboard_mcp.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / ".env.example"
ENTRY = re.compile(r"^# (BB_[A-Z0-9_<>a-z]+)=(.*)$")
# The parent token of `blackboard-mcp token delegate` (_cli/_delegate.py): a client's.
CLIENT_TOKEN = "BB_TOKEN"
# Read by name outside Settings: one variable per secret handle (auth/_secrets.py).
PER_HANDLE = "BB_SECRET_"


def _entries() -> dict[str, str]:
    entries: dict[str, str] = {}
    for line in EXAMPLE.read_text().splitlines():
        match = ENTRY.match(line)
        if match:
            assert match[1] not in entries, f"{match[1]} is listed twice"
            entries[match[1]] = match[2]
    return entries


def _env_name(field: str) -> str:
    return f"BB_{field.upper()}"


def test_copying_the_example_sets_nothing() -> None:
    for number, line in enumerate(EXAMPLE.read_text().splitlines(), 1):
        assert not line.strip() or line.startswith("#"), f"line {number} is not commented out"


def test_every_settings_field_is_listed() -> None:
    listed = set(_entries())
    missing = {_env_name(f) for f in Settings.model_fields} - listed
    assert not missing


def test_every_bb_variable_named_in_the_code_is_listed() -> None:
    # Names in the package's source: the settings' own, and those read directly (auth reads
    # BB_SECRET_<handle>).
    named: set[str] = set()
    for path in (ROOT / "blackboard_mcp").rglob("*.py"):
        named |= set(re.findall(r"\bBB_[A-Z][A-Z0-9_]*", path.read_text()))
    assert PER_HANDLE in named
    listed = set(_entries())
    assert f"{PER_HANDLE}<handle>" in listed
    assert not {n for n in named if n != PER_HANDLE} - listed
    fields = {_env_name(f) for f in Settings.model_fields}
    # Nothing listed that the code does not read (the server's settings, a handle's secret,
    # and the token `token delegate` reads, which is a client's).
    assert not listed - fields - {f"{PER_HANDLE}<handle>", CLIENT_TOKEN}


def test_each_listed_value_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("BB_")]:
        monkeypatch.delenv(name)
    defaults = Settings()
    by_env = {_env_name(f): f for f in Settings.model_fields}
    for env, value in _entries().items():
        field = by_env.get(env)
        if field is None:
            continue
        if value == "":
            # Unset: the field's default is None, or computed at start (the data dir).
            info = Settings.model_fields[field]
            assert info.default is None or info.default_factory is not None, env
            continue
        monkeypatch.setenv(env, value)
        assert getattr(Settings(), field) == getattr(defaults, field), env
        monkeypatch.delenv(env)
