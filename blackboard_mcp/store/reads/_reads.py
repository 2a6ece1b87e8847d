"""get_state and list_keys: batched reads under an honest token budget.

A read makes two passes over Redis. The first fetches each note's small fields (sizes and
stored token counts among them) and its links; the budget then decides which items can be
shown, and the second fetches content (a body, an offloaded blob, or just the start of one
for an item that will be cut) for those items only, and get_state's provenance questions
(the linked notes' versions now) with it. A read at a small budget over notes of a megabyte
each moves kilobytes, not megabytes.

get_state and list_keys share those two passes, so they stay in one module, a little over
400 lines.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .._errors import Contended, InvalidArgument
from ..connection import _key_names as keys
from ..connection._board_client import BoardClient
from ..connection._field_names import FIELD, STORED_NAMES
from ..connection._tx import Gate
from ..notes._addresses import SCHEME, Address
from ..notes._links import decode_links
from ..notes._provenance import (
    Provenance,
    decode_outgoing,
    decode_record,
    provenance_warnings,
    source_records,
)
from ..notes._tokencount import TokenCounter, count_as_json_string, count_json, counted_off_loop
from ..requests import GetState, ListKeys
from ..requests._page_keys import encode
from ._budget import Entry, Render, finish, fit, fit_off_loop, plan, position_ranges
from ._deletions import decode_deleted, deleted_since
from ._paging import history_page, select_page
from ._table_rows import rows_in_range
from ._views import (
    META_FIELDS,
    READ_ATTEMPTS,
    Readable,
    build_entry,
    fields_for,
    iso_time,
    part_entry,
    stored_columns,
)

# What the missing catch-up note's item says (README, "The catch-up note").
CATCH_UP_HINT = (
    "the fleet's catch-up note, read first by every agent: nobody has written it yet. "
    "Write it with update_state: the goal, the state of the work, and where to read next"
)
# A change feed names this many of the notes deleted since its cursor, and counts the rest.
_NAMED_DELETIONS = 5
# Bytes of an offloaded body fetched per token of budget when only its start can be shown.
# A token of cl100k is rarely over 16 bytes; a cut that uses up a short prefix is still
# exact, it just shows less than the budget allowed.
_PREFIX_BYTES_PER_TOKEN = 24


def _text(value: bytes | None) -> str:
    return value.decode() if value is not None else ""


# A note's fields, its outgoing and incoming links, and its outgoing links' version records.
FetchedNote = tuple[dict[str, str] | None, set[bytes], set[bytes], dict[bytes, bytes]]
Fetched = list[FetchedNote]
# What stands in for a note the caller may not read: never fetched.
REFUSED: FetchedNote = (None, set(), set(), {})


async def fetch_meta(
    client: BoardClient,
    workspace: str,
    addresses: Sequence[Address],
    names: list[str] = META_FIELDS,
    *,
    deletions_after: int | None = None,
    gate: Gate | None = None,
) -> tuple[Fetched, int, list[tuple[int, str]]]:
    """One round trip for every note's small fields and both link sets, the workspace's
    change sequence number (the read's cursor) and, for a cursor read, the notes deleted
    after ``deletions_after``. Content is never fetched here.

    ``gate`` goes first and is judged before any reply is looked at: refused, nothing read
    is used. Every command goes in one round trip on a wire (store/connection/_wire.py), so the
    replies are raw: a set is a list, a missing value None."""
    commands: list[tuple[Any, ...]] = []
    if gate is not None:
        commands.append(gate.command)
    if deletions_after is not None:
        commands.append(deleted_since(workspace, deletions_after))
    # Addresses of one version are fetched once: parts of a note (``...@7#5120``) share their
    # version's fields, and need no links (a part shows only content).
    stored = [STORED_NAMES[name] for name in names]
    distinct: dict[tuple[str, int | None, bool], int] = {}
    firsts: list[Address] = []
    for address in addresses:
        part = address.start is not None
        key = (address.member, address.version, part)
        if key in distinct:
            continue
        distinct[key] = len(firsts)
        firsts.append(address)
        ws, member = address.workspace, address.member
        commands.append(("HMGET", keys.note(ws, member), *stored))
        if address.version is not None:
            # The kept copy, unless the version asked for is the current one.
            commands.append(("HMGET", keys.version(ws, member, address.version), *stored))
        if not part:
            commands.append(("SMEMBERS", keys.links_out(ws, member)))
            commands.append(("SMEMBERS", keys.links_in(ws, member)))
            commands.append(("HGETALL", keys.links_at(ws, member)))
    commands.append(("GET", keys.sequence(workspace)))
    replies = await client.round_trip(commands)
    if gate is not None:
        gate.judge(replies.pop(0))
    deleted = decode_deleted(replies.pop(0)) if deletions_after is not None else []
    cursor = int(replies.pop() or 0)
    found: list[tuple[dict[str, str] | None, set[bytes], set[bytes], dict[bytes, bytes]]] = []
    at = 0
    for address in firsts:
        values = replies[at]
        kept = replies[at + 1] if address.version is not None else None
        at += 1 if kept is None else 2
        if address.start is not None:
            outgoing, incoming, records = [], [], {}
        else:
            outgoing, incoming, records = replies[at], replies[at + 1], replies[at + 2]
            at += 3
        note = _version_of(address, names, values, kept)
        found.append(
            (note, set(outgoing), set(incoming), _as_mapping(records))
            if note
            else (None, set(), set(), {})
        )
    out: Fetched = [found[distinct[(a.member, a.version, a.start is not None)]] for a in addresses]
    return out, cursor, deleted


# The links judged for provenance per note, each way (README, "Links and provenance").
_JUDGED_LINKS = 256


@dataclass
class ProvenanceQuestions:
    """What a read must ask Redis to judge its notes' provenance, and where the answers go.

    ``judged`` holds each note's provenance (None for a note with neither links nor sources),
    its records decoded and the other notes' versions still unknown until ``answer``."""

    judged: list[Provenance | None]
    commands: list[tuple[Any, ...]]
    # Per command, what it answers: (position, "now", members) or (position, "in", rel,
    # member).
    asked: list[tuple[Any, ...]]

    def answer(self, replies: Sequence[Any]) -> list[Provenance | None]:
        for question, reply in zip(self.asked, replies, strict=True):
            provenance = self.judged[question[0]]
            assert provenance is not None
            if question[1] == "now":
                now = provenance.now
                for member, score in zip(question[2], reply, strict=True):
                    if score is not None:
                        now[member] = int(float(score))
            else:
                record = decode_record(reply)
                if record is not None:
                    provenance.incoming[(question[2], question[3])] = record
        return self.judged


def provenance_questions(
    addresses: Sequence[Address], fetched: Fetched, readable: Readable
) -> ProvenanceQuestions:
    """Each note's links' version records (an incoming link's from the note that made it) and
    the current versions of the notes at their other ends and of its sources, as commands for
    one round trip. Nothing is asked of a topic the caller may not read."""
    questions = ProvenanceQuestions([], [], [])
    for n, (address, (note, outgoing, incoming, records)) in enumerate(
        zip(addresses, fetched, strict=True)
    ):
        ws = address.workspace
        sources = _sources_at(note, f"{SCHEME}{ws}/") if note is not None else []
        if note is None or not (outgoing or incoming or sources):
            questions.judged.append(None)
            continue
        # At most _JUDGED_LINKS each way: a note any number of others link to costs a read a
        # bounded round trip (the rest give the plain warnings of their relation).
        outgoing_records = sorted(decode_outgoing(records).items())[:_JUDGED_LINKS]
        provenance = Provenance(outgoing=dict(outgoing_records), sources=sources)
        for raw in sorted(incoming)[:_JUDGED_LINKS]:
            rel, _, member = raw.decode().partition("\t")
            if readable(member.split("/", 1)[0]):
                questions.commands.append(
                    ("HGET", keys.links_at(ws, member), f"{rel}\t{address.member}")
                )
                questions.asked.append((n, "in", rel, member))
        others = provenance.others()
        # Versions now, one command per topic: the topic's notes by version hold them.
        by_topic: dict[str, list[str]] = {}
        for member in sorted(others):
            topic = member.partition("/")[0]
            if readable(topic):
                by_topic.setdefault(topic, []).append(member)
        for topic, members in by_topic.items():
            cut = len(topic) + 1
            questions.commands.append(
                ("ZMSCORE", keys.by_version(ws, topic), *[m[cut:] for m in members])
            )
            questions.asked.append((n, "now", members))
        questions.judged.append(provenance)
    return questions


async def judge_provenance(
    client: BoardClient,
    addresses: Sequence[Address],
    fetched: Fetched,
    readable: Readable,
) -> list[Provenance | None]:
    """Each note's provenance (``provenance_questions``), asked in one round trip of its own."""
    questions = provenance_questions(addresses, fetched, readable)
    if not questions.commands:
        return questions.judged
    return questions.answer(await client.round_trip(questions.commands))


def _sources_at(note: dict[str, str], prefix: str) -> list[tuple[str, int]]:
    """The note's sources (members of its workspace) with the versions they had when it was
    written; none for a note written before versions were recorded, or whose fields are not
    what a write stores."""
    if not note.get("source_at") or not note.get("sources"):
        return []
    try:
        sources, versions = orjson.loads(note["sources"]), orjson.loads(note["source_at"])
    except orjson.JSONDecodeError:
        return []
    if not isinstance(sources, list) or not isinstance(versions, list):
        return []
    return source_records(sources, versions, prefix)


def _as_mapping(reply: Any) -> dict[bytes, bytes]:
    """An HGETALL reply as a dict: a flat list on RESP2, a map on RESP3."""
    if isinstance(reply, dict):
        return reply
    if not reply:
        return {}  # most notes have no links
    return dict(zip(reply[::2], reply[1::2], strict=True))


# Marks on a fetched note's fields (never shown): the note's current version when the
# fields are a kept past version's, whose content is then read from the kept copy.
CURRENT_VERSION = "_current_version"


def _version_of(
    address: Address, names: list[str], values: list[Any], kept: list[Any] | None
) -> dict[str, str] | None:
    """The fields of what ``address`` names: the note, or the kept version it asks for.

    The first of ``names`` must be a field every note holds: its absence means no note."""
    if values[0] is None:
        return None
    # Inline, not _text: this runs for every field of every note a read or a listing shows.
    note = {f: v.decode() if v is not None else "" for f, v in zip(names, values, strict=True)}
    if kept is None or note["version"] == str(address.version):
        note["uri"] = address.note.uri if kept is None else address.uri
        return note
    if kept[0] is None:
        return None
    past = {f: _text(v) for f, v in zip(names, kept, strict=True)}
    past["uri"] = address.uri
    past[CURRENT_VERSION] = note["version"]
    return past


async def _fetch_content(
    client: BoardClient,
    counter: TokenCounter,
    wanted: list[tuple[Entry, Address, dict[str, str]]],
    prefix_bytes: int | None,
    also: Sequence[tuple[Any, ...]] = (),
) -> tuple[list[int], list[Any]]:
    """Give each entry its content: one field of the note, or its blob (whole, or the first
    ``prefix_bytes`` bytes of the first entry when only that one may be shown, cut).

    The content must be of the version the entry's fields name, though a write may have come
    between the round trip that read them and this one. A body in the hash is read with the
    version in one command and compared; a blob's name is its content (or a log that only
    grows, read up to the size its version had), so a blob can only be gone, which a short
    read shows. Returns the positions in ``wanted`` whose note moved on: their entries are
    left without content, for the caller to read again. An entry whose fields came with its
    body (a second reading) takes that body as it is: both are of one moment of the hash.

    ``also`` are other commands of the read (its provenance questions) sent in the same round
    trip; their replies are returned beside the positions.
    """
    commands: list[tuple[Any, ...]] = []
    # Per command: the position in ``wanted``, the bytes a blob range must hold (None for a
    # body read with its version) and where in the whole text what it reads begins.
    expected: list[tuple[int, int | None, int]] = []
    for i, (entry, address, note) in enumerate(wanted):
        if entry.fetched:
            continue
        table = entry.big == "rows"
        if not note.get("blob"):
            if "body" in note:
                _give_content(counter, entry, note, note["body"].encode())
                continue
            key = (
                keys.version(address.workspace, address.member, note["version"])
                if CURRENT_VERSION in note
                else keys.note(address.workspace, address.member)
            )
            commands.append(("HMGET", key, FIELD.version, FIELD.body))
            expected.append((i, None, 0))
            continue
        # A blob is read up to the size its note said: an appended note's log blob may have
        # grown since (store/notes/_appends.py), and what was read is this version's content.
        # A part's range starts a character's width early, its offset may fall inside one;
        # a table's one byte early, to see whether its offset starts a row.
        end = int(note.get("size") or 0)
        early = 1 if table else _LONGEST_CHARACTER - 1
        begin = max(0, entry.start - early)
        if i == 0 and prefix_bytes is not None:
            end = min(end, entry.start + prefix_bytes)
        blob_key = keys.blob(address.workspace, note["blob"])
        if begin >= end:
            # Nothing from there on (a start past the end): a range that reads nothing.
            commands.append(("GETRANGE", blob_key, 1, 0))
            expected.append((i, 0, begin))
        else:
            commands.append(("GETRANGE", blob_key, begin, end - 1))
            expected.append((i, end - begin, begin))
    if not commands and not also:
        return [], []
    replies = await client.round_trip([*commands, *also])
    moved: list[int] = []
    for (i, length, offset), raw in zip(expected, replies[: len(commands)], strict=True):
        entry, _, note = wanted[i]
        if length is None:
            version, data = raw
            if version is None or version.decode() != note["version"]:
                moved.append(i)
                continue
        else:
            data = raw or b""
            if len(data) != length:
                moved.append(i)
                continue
        data = data or b""
        # A long table's rows are parsed and counted, a long text decoded: beside the loop,
        # as a long count is (store/notes/_tokencount.py). The entry is this read's.
        give = functools.partial(_give_content, counter, entry, note, data, offset)
        await counted_off_loop(len(data), give)
    return moved, replies[len(commands) :]


def _give_content(
    counter: TokenCounter, entry: Entry, note: dict[str, str], data: bytes, offset: int = 0
) -> None:
    """``entry``'s content from the bytes read of its note, ``data`` being the text from
    byte ``offset`` on. A part whose offset falls inside a character starts at that
    character's first byte (``entry.start`` moves back to it), so no character is lost; a
    table's part whose offset falls inside a row starts at the next row."""
    size = int(note.get("size") or 0)
    if entry.big == "rows":
        _give_rows(counter, entry, note, data, offset, size)
        return
    if entry.start:
        at = _character_start(data, entry.start - offset)
        entry.start = offset + at
        data = data[at:]
        size = max(0, size - entry.start)
    entry.partial = len(data) < size
    # A range may end inside a character; the partial one is dropped.
    entry.content = data.decode("utf-8", "ignore")


def _give_rows(
    counter: TokenCounter,
    entry: Entry,
    note: dict[str, str],
    data: bytes,
    offset: int,
    size: int,
) -> None:
    entry.size = size
    columns = stored_columns(note)
    picked = None if entry.columns is None else [columns.index(c) for c in entry.columns]
    if offset == 0 and entry.start > 1:
        # A table kept in the note's hash comes whole: read it from a byte before the part.
        offset = entry.start - 1
        data = data[offset:]
    entry.rows, entry.partial = rows_in_range(
        data, offset=offset, start=entry.start, size=size, picked=picked, width=len(columns)
    )
    if not entry.partial:
        entry.big_tokens = count_json(counter, orjson.dumps(entry.rows.cells).decode())


# The most bytes one character takes in UTF-8.
_LONGEST_CHARACTER = 4


def _character_start(data: bytes, at: int) -> int:
    """``at``, or the first byte of the character ``at`` falls inside of (UTF-8's
    continuation bytes are 0b10xxxxxx)."""
    while 0 < at < len(data) and data[at] & 0xC0 == 0x80:
        at -= 1
    return at


def readable_links(
    workspace: str, outgoing: set[bytes], incoming: set[bytes], readable: Readable
) -> list[dict[str, str]]:
    # A link into a topic the caller may not read would leak that note's name.
    return decode_links(workspace, outgoing, incoming, readable)


def _entries(
    addresses: Sequence[Address],
    fetched: Fetched,
    *,
    mode: Any,
    fields: Sequence[str],
    readable: Readable,
    judged: Sequence[Provenance | None] | None = None,
    mark_past: bool = True,
    pending: list[_Pending] | None = None,
) -> list[tuple[Entry, dict[str, str] | None]]:
    """The items; a past version's says so and names the current one, unless ``mark_past``
    is off (a note's list of versions, where the first is the current one). ``judged`` is
    each note's provenance (``judge_provenance``), for the warnings that say what moved on.

    With ``pending``, ``judged`` is not answered yet: a note with provenance gets its links'
    plain warnings for now, and a ``_Pending`` in ``pending`` to replace them once it is."""
    out: list[tuple[Entry, dict[str, str] | None]] = []
    for n, (address, fetched_note) in enumerate(zip(addresses, fetched, strict=True)):
        note, outgoing, incoming, _ = fetched_note
        if fetched_note is REFUSED:
            out.append((Entry(address.uri, {"uri": address.uri, "error": "forbidden"}), None))
            continue
        if note is None:
            # Reported per uri, and under the budget like any other item.
            item: dict[str, Any] = {"uri": address.uri, "error": "not_found"}
            if address.version is not None:
                item["hint"] = (
                    f"no version {address.version} of this note is kept; "
                    f"read {address.note.uri} as it is now"
                )
            elif address.is_catch_up:
                # An agent meets the catch-up convention here first: say what the note is.
                item["hint"] = CATCH_UP_HINT
            out.append((Entry(address.uri, item), None))
            continue
        if address.start is not None:
            # A part is read for its content, which a digest or ref read would not show.
            part_mode: Any = "full" if mode in ("digest", "ref") else mode
            entry = part_entry(note, uri=address.uri, mode=part_mode, fields=fields)
            if entry.big is not None:
                entry.rest_of = f"{address.note.uri}@{note['version']}"
                _start_at(entry, address.start, int(note.get("size") or 0))
            out.append((entry, note))
            continue
        links = readable_links(address.workspace, outgoing, incoming, readable)
        current = note.get(CURRENT_VERSION)
        version = int(current or note.get("version") or 0)
        provenance = judged[n] if judged is not None else None
        later = pending is not None and provenance is not None
        warnings = provenance_warnings(
            address.uri,
            version,
            links,
            None if later else provenance,
            workspace_prefix=f"{SCHEME}{address.workspace}/",
            readable=readable,
        )
        said = len(warnings)
        if current is not None and mark_past:
            warnings.append(
                f"{address.uri} is a past version; the note is at version {current} "
                "(links shown are its current ones)"
            )
        entry = build_entry(
            note, mode=mode, fields=fields, links=links, warnings=warnings, readable=readable
        )
        if entry.big is not None:
            entry.rest_of = f"{address.note.uri}@{note['version']}"
        if current is not None and mark_past:
            entry.item["current_version"] = int(current)
        if pending is not None and later:
            pending.append(_Pending(entry, n, address, version, links, said))
        out.append((entry, note))
    return out


@dataclass
class _Pending:
    """An entry read before its provenance was answered: the first ``said`` of its warnings
    are its links' plain ones, replaced by ``settle`` with what the answers show."""

    entry: Entry
    position: int  # in the read's addresses (and its provenance questions)
    address: Address
    version: int
    links: list[dict[str, str]] = field(repr=False)
    said: int

    def settle(self, judged: Sequence[Provenance | None], readable: Readable) -> None:
        self.entry.warnings[: self.said] = provenance_warnings(
            self.address.uri,
            self.version,
            self.links,
            judged[self.position],
            workspace_prefix=f"{SCHEME}{self.address.workspace}/",
            readable=readable,
        )


@dataclass
class _AskedWithContent:
    """A read's provenance questions, sent with its content, and the entries whose warnings
    wait for the answers."""

    questions: ProvenanceQuestions
    pending: list[_Pending]
    readable: Readable

    def settle(self, replies: Sequence[Any]) -> None:
        judged = self.questions.answer(replies)
        for waiting in self.pending:
            waiting.settle(judged, self.readable)


def _start_at(entry: Entry, start: int, size: int) -> None:
    """Read ``entry``'s content from byte ``start``: planned on the share of the stored
    count its bytes are (the fit that follows is exact)."""
    entry.start = start
    entry.total_tokens = entry.big_tokens
    remaining = max(0, size - start)
    entry.big_tokens = entry.big_tokens * remaining // size if size else 0


Refetch = Callable[[list[Address]], Awaitable[list[tuple[Entry, dict[str, str] | None]]]]


async def _fetch_to_show(
    client: BoardClient,
    counter: TokenCounter,
    budget: int,
    addresses: Sequence[Address],
    built: list[tuple[Entry, dict[str, str] | None]],
    render: Render,
    refetch: Refetch,
    asked: _AskedWithContent | None = None,
) -> tuple[list[Entry], int]:
    """Plan from estimates and fetch the content of what is planned: the entries, their
    content at hand, and how many of them the plan shows, for ``fit_off_loop`` to fit exactly.

    An item whose note was written between the two round trips is read again, its fields
    with its body (``refetch``), and the plan made anew: every item shown is one version.

    ``asked`` (the entries' provenance questions) goes with the first content round trip.
    The plan counts the links' plain warnings for those entries; the fit, after the answers,
    counts what is shown exactly."""
    for _ in range(READ_ATTEMPTS):
        entries = [e for e, _ in built]
        base = finish(counter, render([], [], 0))
        count = plan(counter, budget, entries, base)
        # The first entry is fetched even when it does not fit whole: it may be shown cut.
        reach = max(count, 1)
        positions = [
            p for p in range(min(reach, len(built))) if built[p][0].big is not None and built[p][1]
        ]
        wanted = [(built[p][0], addresses[p], built[p][1] or {}) for p in positions]
        prefix = budget * _PREFIX_BYTES_PER_TOKEN if count == 0 else None
        also = asked.questions.commands if asked is not None else []
        found_moved, answers = await _fetch_content(client, counter, wanted, prefix, also)
        if asked is not None:
            asked.settle(answers)
            asked = None
        moved = [positions[i] for i in found_moved]
        if not moved:
            return entries, count
        for p, again in zip(moved, await refetch([addresses[p] for p in moved]), strict=True):
            built[p] = again
    raise Contended(
        "the notes read were rewritten faster than they could be read whole",
        hint="read them again; a note written this often is better read in smaller batches",
    )


async def get_state(
    client: BoardClient,
    counter: TokenCounter,
    request: GetState,
    *,
    readable: Readable,
    gate: Gate | None = None,
) -> dict[str, Any]:
    given = request.uris
    addresses = list(dict.fromkeys(given))
    checked_mode = request.mode
    checked_fields = request.fields
    budget = request.budget_tokens
    # Where each position of ``uris`` is in ``addresses`` (duplicates share one item).
    index = {a: i for i, a in enumerate(addresses)}
    slot = [index[a] for a in given]
    # An address the caller may not read is that item's refusal, decided before any I/O:
    # nothing of the note is fetched, so nothing of it (existence, size, digest) can show.
    # The catch-up note is every reader's, whatever its topics; the rest of run is not.
    allowed = [a for a in addresses if a.is_catch_up or readable(a.topic)]
    refused_topics = sorted({a.topic for a in set(addresses).difference(allowed)})
    names = fields_for(
        "full" if any(a.start is not None for a in allowed) else checked_mode, checked_fields
    )
    async with client.operation():
        fetched, cursor, _ = await fetch_meta(
            client, addresses[0].workspace, allowed, names, gate=gate
        )

        async def build(
            at: list[Address], found: Fetched
        ) -> list[tuple[Entry, dict[str, str] | None]]:
            return _entries(
                at,
                found,
                mode=checked_mode,
                fields=checked_fields,
                readable=readable,
                judged=await judge_provenance(client, at, found, readable),
            )

        by_address = dict(zip(allowed, fetched, strict=True))
        found = [by_address.get(a, REFUSED) for a in addresses]
        # The provenance of what was found is asked with the content, in one round trip.
        questions = provenance_questions(addresses, found, readable)
        pending: list[_Pending] = []
        built = _entries(
            addresses,
            found,
            mode=checked_mode,
            fields=checked_fields,
            readable=readable,
            judged=questions.judged,
            pending=pending,
        )
        notices = [
            f"the token may not read topic {t!r}; those items are refused" for t in refused_topics
        ]

        def render(items: list[dict[str, Any]], warnings: list[str], shown: int) -> dict[str, Any]:
            out: dict[str, Any] = {
                "items": items,
                "spent_tokens": 0,
                "truncated": shown < len(addresses) or any("cut" in i for i in items),
                "omitted": len(addresses) - shown,
                "omitted_at": position_ranges([p for p, i in enumerate(slot) if i >= shown]),
                "cursor": cursor,
            }
            if notices or warnings:
                out["warnings"] = [*notices, *warnings]
            return out

        async def refetch(again: list[Address]) -> list[tuple[Entry, dict[str, str] | None]]:
            # The fields with the body, in one command per note: of one version.
            fetched_again, _, _ = await fetch_meta(
                client, addresses[0].workspace, again, [*names, "body"]
            )
            return await build(again, fetched_again)

        entries, count = await _fetch_to_show(
            client,
            counter,
            budget,
            addresses,
            built,
            render,
            refetch,
            asked=_AskedWithContent(questions, pending, readable),
        )
    # Counting and cutting the answer is no Redis operation: outside its deadline.
    return (await fit_off_loop(counter, budget, entries, count, render)).response


async def list_keys(
    client: BoardClient,
    counter: TokenCounter,
    request: ListKeys,
    *,
    workspace: str,
    readable: Readable,
    gate: Gate | None = None,
) -> dict[str, Any]:
    """A page of notes. ``gate`` (the call's admission) rides the listing's first round trip
    and is judged before anything read is used; a listing that sends none, or fails before
    one, has it judged alone, so that a refusal comes first."""
    checked_mode = request.mode
    checked_fields = request.fields
    budget = request.budget_tokens
    since = request.cursor
    feed = request.feed
    start = request.after
    topic = request.topic
    notices: list[str] = []
    async with client.operation(), client.admitted(gate) as client:
        if request.note is not None:
            # A note's versions, newest first; its scopes were checked as a read of it.
            topics = []
            note = request.note
            rows, stop = (
                await history_page(client, note, limit=request.limit, after=start)
                if note.is_catch_up or readable(note.topic)
                else ([], None)
            )
            addresses = [Address(workspace, r.topic, r.path, r.score) for r in rows]
        elif topic is not None:
            # The gateway has checked the caller's scopes already; filter anyway, so the
            # store never lists a topic its ``readable`` predicate refuses.
            topics = [t for t in [topic] if readable(t)]
        else:
            [members] = await client.round_trip([("SMEMBERS", keys.topics(workspace))])
            known = sorted(t.decode() for t in members)
            topics = [t for t in known if readable(t)]
            notices.append(
                f"no topic given: listed every topic you may read ({len(topics)}); "
                "pass topic= to narrow it"
            )
        if request.note is None:
            rows, stop = await select_page(
                client,
                workspace,
                topics,
                feed=feed,
                kind=request.kind,
                limit=request.limit,
                after=start,
                since=since,
            )
            addresses = [Address(workspace, r.topic, r.path) for r in rows]
        names = META_FIELDS if checked_mode == "table" else fields_for(checked_mode, checked_fields)
        fetched, now, deleted = await fetch_meta(
            client, workspace, addresses, names, deletions_after=since
        )
        gone = [
            (seq, member)
            for seq, member in deleted
            # Not ``in topics``: a topic deleted whole is no longer among the known ones.
            if _shown_topic(member.split("/", 1)[0], topic, readable)
        ]
        if checked_mode == "table":
            entry_mode: Any = "digest"
        else:
            # Fields name exactly what each item holds, in digest and ref mode alike.
            entry_mode = "fields" if checked_fields else checked_mode
        built = _entries(
            addresses,
            fetched,
            mode=entry_mode,
            fields=checked_fields,
            readable=readable,
            # A note's versions share its links: judged once, on the note itself.
            judged=await judge_provenance(client, addresses, fetched, readable)
            if request.note is None
            else None,
            mark_past=request.note is None,
        )

    def render(items: list[dict[str, Any]], warnings: list[str], shown: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "items": items,
            "spent_tokens": 0,
            "truncated": shown < len(rows),
            "omitted": len(rows) - shown,
            "cursor": _page_cursor(since, rows, shown, stop, now),
        }
        if gone:
            warnings = [*_deleted_notice(workspace, gone, out["cursor"]), *warnings]
        if shown:
            if shown < len(rows) or stop is not None:
                out["next"] = encode(feed, rows[shown - 1])
        elif stop is not None and not rows:
            out["next"] = encode(feed, stop)
        if notices or warnings:
            out["warnings"] = [*notices, *warnings]
        return out

    # On the loop, unlike a long read's fit: a listing's text is many short digests, each
    # counted on its own, and a worker thread would wait for the GIL before each of them.
    if checked_mode == "table":
        return _table_response(counter, budget, built, fetched, checked_fields, render)
    entries = [e for e, _ in built]
    base = finish(counter, render([], [], 0))
    return fit(counter, budget, entries, plan(counter, budget, entries, base), render).response


def _shown_topic(name: str, topic: str | None, readable: Readable) -> bool:
    return (topic is None or name == topic) and readable(name)


def _deleted_notice(workspace: str, gone: list[tuple[int, str]], upto: int) -> list[str]:
    """One line naming the notes deleted up to the page's cursor, so a follower forgets them."""
    members = [member for seq, member in gone if seq <= upto]
    if not members:
        return []
    named = ", ".join(f"bb://{workspace}/{m}" for m in members[:_NAMED_DELETIONS])
    more = len(members) - _NAMED_DELETIONS
    return [f"deleted since your cursor: {named}" + (f" and {more} more" if more > 0 else "")]


def _page_cursor(since: int | None, rows: list[Any], shown: int, stop: Any, now: int) -> int:
    # A change feed continues from the last change shown when anything is left after it;
    # otherwise the cursor is "now", for the next catch-up.
    if since is not None and (shown < len(rows) or stop is not None):
        return int(rows[shown - 1].score) if shown else since
    return now


def _escape_cell(value: str) -> str:
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


TABLE_COLUMNS = ("uri", "digest", "version", "est_tokens")


def _table_response(
    counter: TokenCounter,
    budget: int,
    built: list[tuple[Entry, dict[str, str] | None]],
    fetched: Fetched,
    fields: Sequence[str],
    render: Render,
) -> dict[str, Any]:
    """One header line plus a TSV row per note: the cheapest listing for three or more.

    ``fields`` are the columns (``uri`` always first); without them, uri, digest, version
    and est_tokens.
    """
    columns = ["uri", *(f for f in fields if f != "uri")] if fields else list(TABLE_COLUMNS)
    header = "\t".join(columns)
    lines: list[str] = []
    warnings: list[list[str]] = []
    for (entry, _), (note, _, _, _) in zip(built, fetched, strict=True):
        # A note deleted between the listing and this read has no fields: show its uri.
        values = note or {"uri": entry.uri}
        lines.append("\t".join(_escape_cell(_cell(values, c)) for c in columns))
        warnings.append(entry.warnings)

    def table_render(shown: int) -> dict[str, Any]:
        out = render([], [w for ws in warnings[:shown] for w in ws], shown)
        out["table"] = "\n".join([header, *lines[:shown]])
        # The table travels beside the (empty) items; keep the envelope's keys first.
        return {"items": out.pop("items"), "table": out.pop("table"), **out}

    total = finish(counter, table_render(0))
    shown = 0
    for i, line in enumerate(lines):
        total += (
            count_as_json_string(counter, line) + 1 + sum(counter.count(w) + 2 for w in warnings[i])
        )
        if total > budget:
            break
        shown = i + 1
    while True:
        response = table_render(shown)
        if finish(counter, response) <= budget or shown == 0:
            break
        shown -= 1
    if shown == 0 and lines:
        need = table_render(1)
        response["need_budget"] = finish(counter, need)
        if finish(counter, response) > budget:
            del response["need_budget"]
            finish(counter, response)
    if response["spent_tokens"] > budget:
        raise InvalidArgument(
            f"budget_tokens={budget} cannot hold even this listing's envelope",
            argument="budget_tokens",
        )
    return response


def _cell(note: dict[str, str], name: str) -> str:
    if name in ("updated", "created"):
        return iso_time(note.get(name, ""))
    if name == "nrows":
        return note.get("nrows", "") if note.get("columns") else ""
    return note.get(name, "")
