"""link_state's request: a source, a relation and its targets, all in one workspace; with
``remove``, the links to take away."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import InvalidArgument, TooLarge
from ..notes._addresses import Address, parse_address
from ..notes._links import MAX_TARGETS, RELATIONS, Relation


@dataclass(frozen=True, slots=True)
class LinkState:
    src: Address
    rel: Relation
    dst: tuple[Address, ...]
    # Take the links away rather than add them.
    remove: bool = False

    @property
    def reads(self) -> tuple[Address, ...]:
        # The targets are read: the answer names them.
        return self.dst

    @property
    def writes(self) -> tuple[Address, ...]:
        # The source note gains the link.
        return (self.src,)

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> LinkState:
        source = parse_address(args.get("src"), argument="src").require_note("src")
        rel = args.get("rel")
        if rel not in RELATIONS:
            raise InvalidArgument(f"rel must be one of {', '.join(RELATIONS)}", argument="rel")
        dst = args.get("dst")
        if isinstance(dst, str):
            dst = [dst]
        if not isinstance(dst, list | tuple) or not dst:
            raise InvalidArgument("dst must be a non-empty list of addresses", argument="dst")
        if len(dst) > MAX_TARGETS:
            raise TooLarge(f"{len(dst)} targets; the limit is {MAX_TARGETS}", argument="dst")
        targets: list[Address] = []
        for value in dst:
            target = parse_address(value, argument="dst").require_note("dst")
            if target.workspace != source.workspace:
                raise InvalidArgument(f"{target.uri} is in another workspace", argument="dst")
            if target == source:
                raise InvalidArgument("a note cannot be linked to itself", argument="dst")
            if target not in targets:
                targets.append(target)
        remove = args.get("remove")
        if remove is not None and not isinstance(remove, bool):
            raise InvalidArgument("remove must be true or false", argument="remove")
        return cls(source, rel, tuple(targets), bool(remove))
