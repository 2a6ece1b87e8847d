"""Board addresses: ``bb://<workspace>/<topic>/<key path>``, validated strictly."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .._errors import InvalidArgument

SCHEME = "bb://"
MAX_URI_LENGTH = 512
MAX_DEPTH = 16
# Workspaces and topics are lower-case names so that scopes and hash tags cannot be
# confused by case; key path segments may mix case.
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_SEGMENT = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,127}")  # as _SEGMENT_TEXT below

CATCH_UP_PATH = "run/state/current"
_CATCH_UP_TOPIC, _, _CATCH_UP_KEY = CATCH_UP_PATH.partition("/")


@dataclass(frozen=True, slots=True)
class Address:
    """A parsed note address."""

    workspace: str
    topic: str
    path: str  # the key path below the topic, e.g. "state/current"
    # A past version of the note (``bb://ws/topic/key@7``); None names the note itself.
    version: int | None = None
    # Where a read of the content starts, in bytes of its UTF-8 text (``...@7#5120``): the
    # rest of a note a budget cut, as the cut names it. None reads from the start.
    start: int | None = None
    # Both are read several times per call: made once, with the address.
    uri: str = field(init=False, repr=False, compare=False)
    member: str = field(init=False, repr=False, compare=False)
    """The note's name inside its workspace: ``<topic>/<path>``, whatever the version."""

    def __post_init__(self) -> None:
        member = f"{self.topic}/{self.path}"
        object.__setattr__(self, "member", member)
        at = "" if self.version is None else f"@{self.version}"
        start = "" if self.start is None else f"#{self.start}"
        object.__setattr__(self, "uri", f"{SCHEME}{self.workspace}/{member}{at}{start}")

    @property
    def is_catch_up(self) -> bool:
        """Names the workspace's catch-up note (or one of its versions or parts), which
        every reader of the workspace may read, whatever its topics (README)."""
        return self.topic == _CATCH_UP_TOPIC and self.path == _CATCH_UP_KEY

    @property
    def note(self) -> Address:
        """The note this address names a version of (itself when it names none)."""
        if self.version is None and self.start is None:
            return self
        return Address(self.workspace, self.topic, self.path)

    def require_note(self, argument: str) -> Address:
        """This address, which must name a note rather than one of its past versions."""
        if self.version is not None or self.start is not None:
            named = f"version {self.version}" if self.start is None else "a part of a note"
            raise InvalidArgument(
                f"{argument} {self.uri} names {named}; {argument} takes the "
                f"note's address, {self.note.uri}",
                argument=argument,
            )
        return self

    def __str__(self) -> str:
        return self.uri

    def __hash__(self) -> int:
        # Equal addresses have equal text, made once with the address, whose hash a str keeps:
        # a read looks its addresses up in dicts and sets several times each, where a
        # generated hash would build and hash a tuple of five fields every time.
        return hash(self.uri)


def is_valid_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def validate_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not is_valid_name(name):
        raise InvalidArgument(
            f"{what} {name!r} is not a valid name: use 1-64 of a-z 0-9 . _ -, "
            "starting with a letter or digit",
            argument=what,
        )
    return name


# A valid address in one match: the workspace, the topic and 1 to MAX_DEPTH segments, none
# of them empty, "." or "..". Anything it does not match goes the long way, which names the
# fault (and accepts exactly what this does: tests/test_addresses.py).
_SEGMENT_TEXT = r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,127}"
# A version after the key: ``@7``. ``@`` cannot occur in a key segment.
_VERSION_TEXT = r"[1-9][0-9]{0,17}"
_VERSION = re.compile(_VERSION_TEXT)
# Then where to start reading: ``#5120``, a byte offset from 1 (at most 10 digits: a note is
# at most a MiB).
_START_TEXT = r"[1-9][0-9]{0,9}"
_START = re.compile(_START_TEXT)
_VALID = re.compile(
    rf"bb://({_NAME.pattern})/({_NAME.pattern})/((?:{_SEGMENT_TEXT}/){{0,{MAX_DEPTH - 1}}}"
    rf"{_SEGMENT_TEXT})(?:@({_VERSION_TEXT}))?(?:#({_START_TEXT}))?"
)


# The same rules as JSON Schema patterns (ECMA-262), for machine descriptions of what is taken.
NAME_PATTERN = rf"^{_NAME.pattern}$"
NOTE_ADDRESS_PATTERN = (
    rf"^bb://{_NAME.pattern}/{_NAME.pattern}/(?:{_SEGMENT_TEXT}/){{0,{MAX_DEPTH - 1}}}"
    rf"{_SEGMENT_TEXT}$"
)


def parse_address(uri: object, *, argument: str = "uri") -> Address:
    """Parse and validate ``uri``; raise InvalidArgument naming what is wrong."""
    if type(uri) is str and len(uri) <= MAX_URI_LENGTH:
        match = _VALID.fullmatch(uri)
        if match is not None:
            return Address(
                match[1],
                match[2],
                match[3],
                None if match[4] is None else int(match[4]),
                None if match[5] is None else int(match[5]),
            )
    return checked_address(uri, argument=argument)


def checked_address(uri: object, *, argument: str = "uri") -> Address:
    """``parse_address`` the long way: each part checked in turn, the first fault named."""
    if not isinstance(uri, str):
        raise InvalidArgument(
            f"{argument} must be a string like bb://ws/topic/key", argument=argument
        )
    if len(uri) > MAX_URI_LENGTH:
        raise InvalidArgument(
            f"{argument} is {len(uri)} characters; the limit is {MAX_URI_LENGTH}", argument=argument
        )
    if not uri.startswith(SCHEME):
        raise InvalidArgument(
            f"{argument} {uri!r} must start with {SCHEME} (bb://<workspace>/<topic>/<key>)",
            argument=argument,
        )
    version: int | None = None
    start: int | None = None
    text = uri
    if "#" in text:
        text, _, start_text = text.partition("#")
        if _START.fullmatch(start_text) is None:
            raise InvalidArgument(
                f"{argument} {uri!r}: where to start reading follows the key (and version) as "
                "#<byte offset>, from 1, as a cut item's rest gives it (bb://ws/topic/key@7#5120)",
                argument=argument,
            )
        start = int(start_text)
    if "@" in text:
        text, _, version_text = text.rpartition("@")
        if _VERSION.fullmatch(version_text) is None:
            raise InvalidArgument(
                f"{argument} {uri!r}: a version follows the key as @<number>, from 1 "
                "(bb://<workspace>/<topic>/<key>@7)",
                argument=argument,
            )
        version = int(version_text)
    parts = text[len(SCHEME) :].split("/")
    if len(parts) < 3:
        raise InvalidArgument(
            f"{argument} {uri!r} needs a workspace, a topic and a key: bb://<workspace>/<topic>/<key>",
            argument=argument,
        )
    if len(parts) - 2 > MAX_DEPTH:
        raise InvalidArgument(
            f"{argument} {uri!r} has more than {MAX_DEPTH} key segments", argument=argument
        )
    workspace, topic, *segments = parts
    validate_name(workspace, "workspace")
    validate_name(topic, "topic")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise InvalidArgument(
                f"{argument} {uri!r} has an empty, '.' or '..' segment", argument=argument
            )
        if _SEGMENT.fullmatch(segment) is None:
            raise InvalidArgument(
                f"{argument} {uri!r}: segment {segment!r} may only use A-Z a-z 0-9 . _ ~ - "
                "(1-128 characters)",
                argument=argument,
            )
    return Address(workspace, topic, "/".join(segments), version, start)


def catch_up_address(workspace: str) -> Address:
    """The well-known note an agent reads first: ``bb://<workspace>/run/state/current``."""
    return Address(validate_name(workspace, "workspace"), "run", "state/current")


def parse_topic_address(uri: object, *, argument: str = "uri") -> tuple[str, str] | None:
    """``(workspace, topic)`` for a topic's address ``bb://<workspace>/<topic>``, or None
    when ``uri`` is not one (it may still be a note's address)."""
    if not isinstance(uri, str) or not uri.startswith(SCHEME) or len(uri) > MAX_URI_LENGTH:
        return None
    parts = uri[len(SCHEME) :].split("/")
    if len(parts) != 2:
        return None
    return validate_name(parts[0], "workspace"), validate_name(parts[1], argument)


def validate_workspace(name: object) -> str:
    return validate_name(name, "workspace")
