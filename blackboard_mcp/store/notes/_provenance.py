"""Versioned provenance: what a note was made from, and whether that has moved on since.

A link records the versions of both its ends when it is made, and a write records the
version of each of its ``sources``. A read compares them with the other notes' versions now:

- a note derived from, citing, depending on, refining or part of another that has been
  written since says so ("... is derived from bb://w/plan/q3 v1; it is at v3");
- a contradiction or supersession recorded against an older version of the note than the one
  read says which version it was about ("... was contradicted by X at v1; this note is at
  v2"), so an agent tells an open dispute from one its note may have settled;
- a note that contradicts another as it was at an older version says so too.

Each other note is named once; the notes of one relation that moved on share a line. Links
and sources made before versions were recorded carry none and give only the plain warnings
(``link_warnings``).

Records: the hash ``keys.links_at(source)`` maps ``<rel>\\t<target member>`` to
``<source version>\\t<target version>``; a note's ``source_at`` field holds its sources'
versions, in the order of its ``sources``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

# Relations whose target the source is built on: its moving on may make the source stale.
DERIVED = {
    "derived_from": "is derived from",
    "cites": "cites",
    "depends_on": "depends on",
    "refines": "refines",
    "part_of": "is part of",
}
SOURCE_VERB = "was written from"


_WARNED = (
    ("supersedes", "from", "is superseded by"),
    ("contradicts", "from", "is contradicted by"),
    ("contradicts", "to", "contradicts"),
)


def once_per_link(warnings: list[str]) -> list[str]:
    """The warnings, each link said once: when both ends of a ``contradicts`` link are in
    one answer, "A contradicts B" stays and "B is contradicted by A" goes."""
    said = set(warnings)
    kept = []
    for warning in warnings:
        # The phrases are _WARNED's: the inverse of "contradicts" seen from the other end.
        target, sep, source = warning.partition(" is contradicted by ")
        if sep and f"{source} contradicts {target}" in said:
            continue
        kept.append(warning)
    return kept


def link_warnings(uri: str, links: list[dict[str, str]]) -> list[str]:
    """What a reader must know: the note was superseded, or it is disputed.

    One warning per relation, naming one other note and counting the rest (the note's links
    name them all), so a note with 59 ``contradicts`` links costs one line, not 59.
    """
    warnings = []
    for rel, direction, verb in _WARNED:
        others = [link[direction] for link in links if link["rel"] == rel and direction in link]
        if len(others) == 1:
            warnings.append(f"{uri} {verb} {others[0]}")
        elif others:
            warnings.append(f"{uri} {verb} {others[0]} and {len(others) - 1} more")
    return warnings


def encode_record(source_version: int, target_version: int) -> str:
    return f"{source_version}\t{target_version}"


def decode_record(raw: bytes | str | None) -> tuple[int, int] | None:
    """A record's two versions, or None for one that is missing or not two whole numbers."""
    if raw is None:
        return None
    first, _, second = (raw.decode() if isinstance(raw, bytes) else raw).partition("\t")
    try:
        return int(first), int(second)
    except ValueError:
        return None


@dataclass
class Provenance:
    """What one note read needs to be judged: its links' records and the other ends' versions.

    ``outgoing`` and ``incoming`` map ``(rel, other member)`` to the record of that link (for
    an incoming link, the record its source keeps); ``sources`` pairs each source (a member
    of the workspace) with the version it had when this note was written; ``now`` holds the
    other notes' current versions (a member missing from it is gone).
    """

    outgoing: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    incoming: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    sources: list[tuple[str, int]] = field(default_factory=list)
    now: dict[str, int] = field(default_factory=dict)

    def others(self) -> set[str]:
        """Every other note whose current version the judgement needs."""
        members = {member for _, member in self.outgoing}
        members.update(member for _, member in self.incoming)
        members.update(member for member, _ in self.sources)
        return members


def decode_outgoing(records: Mapping[bytes, bytes]) -> dict[tuple[str, str], tuple[int, int]]:
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for raw_key, raw_value in records.items():
        rel, tab, member = raw_key.decode().partition("\t")
        record = decode_record(raw_value)
        if tab and record is not None:
            out[(rel, member)] = record
    return out


def source_records(
    sources: Sequence[object], versions: Sequence[object], prefix: str
) -> list[tuple[str, int]]:
    """Pairs (source member, version) from a note's fields, ``prefix`` being its workspace's
    ``bb://<workspace>/``; anything malformed is skipped."""
    return [
        (uri[len(prefix) :], version)
        for uri, version in zip(sources, versions, strict=False)
        if isinstance(uri, str)
        and uri.startswith(prefix)
        and isinstance(version, int)
        and not isinstance(version, bool)
    ]


def provenance_warnings(
    uri: str,
    version: int,
    links: list[dict[str, str]],
    provenance: Provenance | None,
    *,
    workspace_prefix: str,
    readable: Callable[[str], bool],
) -> list[str]:
    """The warnings a read of ``uri`` (at ``version``, the note's current one) carries.

    ``links`` are the note's links the reader may see (store/notes/_links.py's shape): only
    those are judged, and a source is judged only in a topic ``readable`` admits, so nothing
    of a topic the reader may not read shows, its versions included.
    """
    if provenance is None:
        return link_warnings(uri, links)
    cut = len(workspace_prefix)
    visible_links = {(link["rel"], (link.get("to") or link["from"])[cut:]) for link in links}
    warnings: list[str] = []
    incoming, outgoing = sorted(provenance.incoming.items()), sorted(provenance.outgoing.items())
    # Contradictions and supersessions against this note: open, or about an older version.
    settled: set[tuple[str, str]] = set()
    for rel, verb in (("supersedes", "superseded"), ("contradicts", "contradicted")):
        older = [
            (member, record[1])
            for (r, member), record in incoming
            if r == rel and (rel, member) in visible_links and record[1] < version
        ]
        if older:
            member, at = older[0]
            more = f" and {len(older) - 1} more" if len(older) > 1 else ""
            warnings.append(
                f"{uri} was {verb} by {workspace_prefix}{member} at v{at}{more}; "
                f"this note is at v{version}"
            )
            settled.update((rel, m) for m, _ in older)
    now = provenance.now
    # What this note contradicts as it was: the other note has moved on since.
    moved_contradicted: set[str] = set()
    for (rel, member), (_, at) in outgoing:
        if rel != "contradicts" or (rel, member) not in visible_links:
            continue
        current = now.get(member)
        if current is not None and current > at:
            moved_contradicted.add(member)
            warnings.append(
                f"{uri} contradicts {workspace_prefix}{member} as it was at v{at}; "
                f"it is at v{current}"
            )
    if settled or moved_contradicted:
        links = [
            link
            for link in links
            if not (
                ("from" in link and (link["rel"], link["from"][cut:]) in settled)
                or (
                    link["rel"] == "contradicts"
                    and "to" in link
                    and link["to"][cut:] in moved_contradicted
                )
            )
        ]
    warnings = link_warnings(uri, links) + warnings
    # What this note was built on and has moved on since: each other note named once, in
    # one line per relation (a note citing fifty others that all moved on costs one line).
    said = set(moved_contradicted)
    moved: dict[str, list[tuple[str, int, int | None]]] = {}
    for (rel, member), (_, at) in outgoing:
        phrase = DERIVED.get(rel)
        if phrase is None or member in said or (rel, member) not in visible_links:
            continue
        current = now.get(member)
        if current != at:
            said.add(member)
            moved.setdefault(phrase, []).append((member, at, current))
    for member, at in provenance.sources:
        if member in said or not readable(member.split("/", 1)[0]):
            continue
        current = now.get(member)
        if current != at:
            said.add(member)
            moved.setdefault(SOURCE_VERB, []).append((member, at, current))
    for verb, changes in moved.items():
        if len(changes) == 1:
            member, at, current = changes[0]
            if current is None:
                said_of = "which is deleted"
            elif current > at:
                said_of = f"it is at v{current}"
            else:
                # Deleted and written anew: version numbers start again at 1.
                said_of = f"since deleted and written anew (v{current})"
            warnings.append(f"{uri} {verb} {workspace_prefix}{member} v{at}; {said_of}")
        else:
            named = ", ".join(
                [
                    f"{workspace_prefix}{member} v{at} (deleted)"
                    if current is None
                    else f"{workspace_prefix}{member} v{at} (now v{current})"
                    for member, at, current in changes
                ]
            )
            warnings.append(f"{uri} {verb} notes written since: {named}")
    return warnings
