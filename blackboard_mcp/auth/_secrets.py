"""Secret handles resolve server-side, for a call whose token and tool both name them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ._errors import MissingSecret
from ._grants import Grant
from ._tb import ToolRequirements


class SecretValue:
    """A resolved secret. Printing it shows the handle only; ``reveal()`` gives the value."""

    __slots__ = ("_handle", "_value")

    def __init__(self, handle: str, value: str) -> None:
        self._handle = handle
        self._value = value

    @property
    def handle(self) -> str:
        return self._handle

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"SecretValue({self._handle!r}, ***)"

    __str__ = __repr__


class SecretResolver:
    def __init__(self, *, environ: Mapping[str, str], secrets_dir: Path | None) -> None:
        self._environ = environ
        self._dir = secrets_dir

    def resolve(self, grant: Grant, tool: ToolRequirements, handle: str) -> SecretValue:
        if handle not in tool.secrets:
            raise MissingSecret(f"{tool.mcp_name} does not declare secret handle {handle}")
        if handle not in grant.secrets:
            raise MissingSecret(f"the token does not hold secret handle {handle}")
        if self._dir is not None and (self._dir / handle).is_file():
            return SecretValue(handle, (self._dir / handle).read_text().strip())
        value = self._environ.get(f"BB_SECRET_{handle}")
        if value is None:
            raise MissingSecret(f"secret handle {handle} is not configured on this gateway")
        return SecretValue(handle, value)
