"""Export and import: a workspace's notes and links as records, to back it up or move it.

A record holds everything a read can show of a note (version, digest, content in full, with
an offloaded body inlined, table columns, sources, confidence, author, times, token counts)
and its outgoing links; incoming links are the other notes' outgoing ones, so each link is in
the export once. Records come oldest write first, so an import gives them sequence numbers in
the same order and ``order=recent`` lists them as before.

An import writes each note in one server-side script that refuses to overwrite (a replace
deletes the old note first), with the workspace's next sequence number and an ``import``
entry in the change log; links are added afterwards, each only if both of its notes exist.

Export and import stay in one module, past 400 lines: a record's shape is written by one and
read by the other, and kept side by side they cannot drift apart.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from .._errors import InvalidArgument, TooLarge
from ..connection import _key_names as keys
from ..connection._board_client import RedisCommands
from ..connection._field_names import LONG_NAMES, STORED_NAMES, lua
from ..notes._addresses import SCHEME, Address, parse_address, validate_name
from ..notes._links import RELATIONS
from ..notes._notes import KINDS, MAX_AUTHOR_CHARS, MAX_SOURCES, check_confidence, check_digest
from ..notes._provenance import decode_outgoing, encode_record
from ..notes._tables import MAX_CELL_CHARS, MAX_ROWS, build_table
from ..notes._tokencount import TokenCounter, count_as_json_string
from ..notes._writes import SEARCH_TEXT_BYTES
from ._delete import delete_members

FORMAT = "blackboard-mcp-export"
# 2: a note's kept past versions (store/notes/_history.py) come as records of their own,
# ``uri`` ending in @N, just before the note's record. Version 1 files (no history) import.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
_BATCH = 100
_INT_FIELDS = ("version", "size", "est_tokens", "digest_tokens", "body_tokens", "nrows")
_TIME_FIELDS = ("created", "updated")

# Returns the note's new sequence number; for a note already there, -1 when it is this
# record (same version and digest: written by an earlier run of the same import, which this
# run completes) and 0 when it is another note (kept, and its links from the file left out).
_IMPORT = lua(
    """
if redis.call('EXISTS', KEYS[1]) == 1 then
  local digest = ''
  for i = 9, #ARGV, 2 do
    if ARGV[i] == $digest then digest = ARGV[i + 1] end
  end
  local stored = redis.call('HMGET', KEYS[1], $version, $digest)
  if stored[1] == ARGV[4] and stored[2] == digest then return -1 end
  return 0
end
local seq = redis.call('INCR', KEYS[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fields = {$seq, seq}
for i = 9, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('ZADD', KEYS[4], 0, ARGV[1])
redis.call('ZADD', KEYS[5], ARGV[4], ARGV[1])
redis.call('ZADD', KEYS[6], seq, ARGV[1])
redis.call('SADD', KEYS[7], ARGV[7])
if ARGV[6] ~= '' then
  redis.call('SET', KEYS[9], ARGV[8], 'NX')
  redis.call('HINCRBY', KEYS[8], ARGV[6], 1)
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'seq', seq, 'op', 'import',
  'uri', ARGV[3], 'version', ARGV[4], 'author', ARGV[5], 'at', now)
return seq
"""
)

# Adds a kept past version to a note, only if the note is the one the file gives it to
# (its current version and digest) and the version is not kept already, and to the
# workspace's versions by time (what the retention sweep expires by age). KEYS: the note,
# the kept copy, the note's kept versions, blob refs, the blob, the versions by time. ARGV:
# the note's version and digest, the kept version, the blob's name and content, the
# version's member@version and write time, then the copy's fields.
_IMPORT_VERSION = lua(
    """
local current = redis.call('HMGET', KEYS[1], $version, $digest)
if current[1] ~= ARGV[1] or current[2] ~= ARGV[2] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[2], unpack(fields))
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[3])
redis.call('ZADD', KEYS[6], ARGV[7], ARGV[6])
if ARGV[4] ~= '' then
  redis.call('SET', KEYS[5], ARGV[5], 'NX')
  redis.call('HINCRBY', KEYS[4], ARGV[4], 1)
end
return 1
"""
)

# Adds links from one note only if it and each target still exist (a delete may be running).
# KEYS: the note, its outgoing links, their version records. ARGV: its member, the prefixes of
# notes and of incoming links (completed with a target, in the same slot), then rel, target,
# record triples (an empty record: the export had none).
_LINK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local member, p_note, p_in = ARGV[1], ARGV[2], ARGV[3]
local added = 0
for i = 4, #ARGV, 3 do
  local rel, target, record = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('EXISTS', p_note .. target) == 1 then
    redis.call('SADD', KEYS[2], rel .. '\\t' .. target)
    redis.call('SADD', p_in .. target, rel .. '\\t' .. member)
    if record ~= '' then redis.call('HSET', KEYS[3], rel .. '\\t' .. target, record) end
    added = added + 1
  end
end
return added
"""


def export_header(workspace: str, count: int, exported_at: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "workspace": workspace,
        "notes": count,
        "exported_at": exported_at,
    }


def _to_record(
    workspace: str,
    member: str,
    note: dict[str, str],
    content: str,
    links: set[bytes],
    records: dict[bytes, bytes] | None = None,
) -> dict[str, Any]:
    """A note as a record; a kept past version (``member`` ending in ``@N``) as one too.

    A link carries ``at``, the versions of its two ends when it was made, where the board
    recorded them; a note its sources' versions as ``source_at``."""
    confidence = note.get("confidence", "")
    at = decode_outgoing(records or {})
    record: dict[str, Any] = {
        "uri": f"{SCHEME}{workspace}/{member}",
        "kind": note.get("kind", "text"),
        "version": int(note["version"]),
        "digest": note.get("digest", ""),
        "content": content,
        "offloaded": bool(note.get("blob")),
        "columns": orjson.loads(note["columns"]) if note.get("columns") else None,
        "sources": orjson.loads(note["sources"]) if note.get("sources") else [],
        "confidence": float(confidence) if confidence else None,
        "author": note.get("author", ""),
        "origin": note.get("origin", ""),
        **{name: int(note.get(name) or 0) for name in (*_INT_FIELDS[1:], *_TIME_FIELDS)},
        "links": [
            {"rel": rel, "to": f"{SCHEME}{workspace}/{target}"}
            | ({"at": list(at[(rel, target)])} if (rel, target) in at else {})
            for rel, target in sorted(raw.decode().split("\t", 1) for raw in links)
        ],
    }
    if note.get("source_at"):
        record["source_at"] = orjson.loads(note["source_at"])
    return record


async def count_notes(client: RedisCommands, ws: str) -> int:
    async with client.operation():
        topics = [t.decode() for t in await client.redis.smembers(keys.topics(ws))]
        pipe = client.redis.pipeline(transaction=False)
        for topic in topics:
            pipe.zcard(keys.by_name(ws, topic))
        return sum(await pipe.execute())


async def export_notes(client: RedisCommands, ws: str) -> AsyncIterator[dict[str, Any]]:
    """Every note of workspace ``ws`` (a checked name) as a record, oldest write first."""
    async with client.operation():
        topics = sorted(t.decode() for t in await client.redis.smembers(keys.topics(ws)))
        pipe = client.redis.pipeline(transaction=False)
        sets = [(topic, kind) for topic in topics for kind in KINDS]
        for topic, kind in sets:
            pipe.zrange(keys.by_kind(ws, topic, kind), 0, -1, withscores=True)
        # Every note is in exactly one of its topic's sets by kind, scored by its last write.
        ranked = sorted(
            (int(seq), f"{topic}/{path.decode()}")
            for (topic, _kind), rows in zip(sets, await pipe.execute(), strict=True)
            for path, seq in rows
        )
    members = [member for _seq, member in ranked]
    for start in range(0, len(members), _BATCH):
        for record, kept in await _read_batch(client, ws, members[start : start + _BATCH]):
            # A note's kept versions just before it, read a few at a time: each may hold up
            # to a megabyte, and a batch of notes may keep thousands of them.
            async for version in _kept_versions(client, ws, record, kept):
                yield version
            yield record


# Kept versions read per round trip, and the most content bytes one round trip may bring.
_VERSIONS_AT_ONCE = 32
_CONTENT_BYTES_AT_ONCE = 8 * 1024 * 1024


async def _read_batch(
    client: RedisCommands, ws: str, members: Sequence[str]
) -> list[tuple[dict[str, Any], list[int]]]:
    """Each note's record, and the versions it keeps, read at one moment."""
    out: list[tuple[dict[str, Any], list[int]]] = []
    pending = list(members)
    for _attempt in range(8):
        async with client.operation():
            pipe = client.redis.pipeline(transaction=True)
            for member in pending:
                pipe.hgetall(keys.note(ws, member))
                pipe.smembers(keys.links_out(ws, member))
                pipe.hgetall(keys.links_at(ws, member))
                pipe.zrange(keys.versions(ws, member), 0, -1)
            replies = await pipe.execute()
            notes = [
                (_decoded(raw), (links, records), [int(v) for v in kept])
                for raw, links, records, kept in zip(
                    replies[::4], replies[1::4], replies[2::4], replies[3::4], strict=True
                )
            ]
            pipe = client.redis.pipeline(transaction=False)
            for note, _links, _kept in notes:
                if note.get("blob"):
                    # Up to the size read with it: a log blob may have grown since.
                    end = int(note.get("size") or 0) - 1
                    pipe.getrange(keys.blob(ws, note["blob"]), 0, end)
            blobs = iter(await pipe.execute())
        retry = []
        for member, (note, links, kept) in zip(pending, notes, strict=True):
            if not note:
                continue  # deleted since it was listed
            content = note.get("body", "")
            if note.get("blob"):
                data = next(blobs) or b""
                if len(data) < int(note.get("size") or 0):
                    # Rewritten between the two reads, and its old blob freed: read it again.
                    retry.append(member)
                    continue
                content = data.decode()
            out.append((_to_record(ws, member, note, content, *links), kept))
        if not retry:
            break
        pending = retry
    return out


async def _kept_versions(
    client: RedisCommands, ws: str, record: dict[str, Any], kept: list[int]
) -> AsyncIterator[dict[str, Any]]:
    """The records of the note's kept versions, oldest first: each is immutable once kept,
    so they need not be read with the note; one dropped meanwhile is left out."""
    member = record["uri"].removeprefix(f"{SCHEME}{ws}/")
    for start in range(0, len(kept), _VERSIONS_AT_ONCE):
        chunk = kept[start : start + _VERSIONS_AT_ONCE]
        async with client.operation():
            pipe = client.redis.pipeline(transaction=False)
            for version in chunk:
                pipe.hgetall(keys.version(ws, member, version))
            fields = [_decoded(raw) for raw in await pipe.execute()]
        pending: list[tuple[int, dict[str, str]]] = []
        pending_bytes = 0
        for version, kept_fields in zip(chunk, fields, strict=True):
            if not kept_fields:
                continue
            pending.append((version, kept_fields))
            pending_bytes += int(kept_fields.get("size") or 0) if kept_fields.get("blob") else 0
            if pending_bytes >= _CONTENT_BYTES_AT_ONCE:
                for out in await _version_records(client, ws, member, record, pending):
                    yield out
                pending, pending_bytes = [], 0
        for out in await _version_records(client, ws, member, record, pending):
            yield out


async def _version_records(
    client: RedisCommands,
    ws: str,
    member: str,
    record: dict[str, Any],
    versions: list[tuple[int, dict[str, str]]],
) -> list[dict[str, Any]]:
    async with client.operation():
        pipe = client.redis.pipeline(transaction=False)
        for _version, fields in versions:
            if fields.get("blob"):
                end = int(fields.get("size") or 0) - 1
                pipe.getrange(keys.blob(ws, fields["blob"]), 0, end)
        blobs = iter(await pipe.execute() if any(f.get("blob") for _, f in versions) else [])
    out = []
    for version, fields in versions:
        content = fields.get("body", "")
        if fields.get("blob"):
            data = next(blobs) or b""
            if len(data) < int(fields.get("size") or 0):
                continue  # dropped between the reads, and its blob with it
            content = data.decode()
        past = _to_record(ws, f"{member}@{version}", fields, content, set())
        past["current_version"] = record["version"]
        past["current_digest"] = record["digest"]
        out.append(past)
    return out


def _decoded(raw: dict[bytes, bytes]) -> dict[str, str]:
    """A stored note's fields under their long names; a field this layout does not name is
    left out."""
    return {
        LONG_NAMES[name]: v.decode() for k, v in raw.items() if (name := k.decode()) in LONG_NAMES
    }


@dataclass(frozen=True)
class Imported:
    """A checked record, ready to write into ``address``'s workspace."""

    address: Address
    fields: dict[str, str | int | float]
    content: bytes
    offloaded: bool
    # (rel, target member, the versions of its ends when it was made: "" where not known)
    links: tuple[tuple[str, str, str], ...]
    # A kept past version (``address.version`` set): the version and digest its note must
    # have now for the version to be added to it.
    current: tuple[int, str] | None = None


def check_header(value: object) -> str:
    """The workspace an export came from, once its first line proves it is an export we read."""
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise InvalidArgument(
            f"the first line is not a {FORMAT} header", argument="file",
            hint="give a file written by `blackboard-mcp export`",
        )  # fmt: skip
    if value.get("version") not in READABLE_VERSIONS:
        raise InvalidArgument(
            f"export format version {value.get('version')!r}; this release reads versions "
            f"{' and '.join(map(str, READABLE_VERSIONS))}",
            argument="file",
            hint="import with the release that exported it, or a newer one",
        )
    return validate_name(value.get("workspace"), "workspace")


def _is_version(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SAFE_INTEGER


def _need(record: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = record.get(name)
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise InvalidArgument(f"{name} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


# The largest integer every client reads back exactly (JavaScript's, which /board uses).
MAX_SAFE_INTEGER = 2**53 - 1
# The latest time every read can show (ISO 8601 has four-digit years): the last millisecond
# of the year 9999, in milliseconds since the epoch.
MAX_TIME_MS = 253_402_300_799_999
# What a write stores as a source summary's origin: a path under the source root (at most
# 4,096 characters) and a short description of the file.
MAX_ORIGIN_CHARS = 4096 + 256


@dataclass(frozen=True)
class ImportLimits:
    """The board's bounds a record is held to, as its writes are (BB_* settings)."""

    max_body_bytes: int = 1024 * 1024
    offload_bytes: int = 10 * 1024
    history_versions: int = 50


def _check_table(columns: object, content: bytes) -> list[str]:
    """A table note's columns as a write takes them, and its content as the TSV a write of
    those columns stores: a header line of the columns, then rows of as many cells."""
    if not isinstance(columns, list) or not columns:
        raise InvalidArgument("a table note needs its columns", argument="columns")
    try:
        table = build_table(columns, [])
    except (InvalidArgument, TooLarge) as exc:
        raise type(exc)(exc.message, argument="columns") from exc
    header, *lines = content.decode().split("\n")
    if header != "\t".join(table.columns):
        raise InvalidArgument(
            "the content's first line is not the table's columns", argument="content"
        )
    if len(lines) > MAX_ROWS:
        raise TooLarge(f"{len(lines)} rows; the limit is {MAX_ROWS}", argument="content")
    width = len(table.columns)
    for number, line in enumerate(lines):
        cells = line.split("\t")
        if len(cells) != width:
            raise InvalidArgument(
                f"row {number} has {len(cells)} cells but there are {width} columns",
                argument="content",
            )
        for cell in cells:
            if "\r" in cell or len(cell) > MAX_CELL_CHARS:
                raise InvalidArgument(
                    f"row {number} has a cell over {MAX_CELL_CHARS} characters or with a "
                    "carriage return",
                    argument="content",
                )
    return list(table.columns)


def check_record(
    record: object, *, source: str, target: str, limits: ImportLimits | None = None
) -> Imported:
    """A note record of an export from ``source``, checked and re-addressed to ``target``.

    A record is held to what a write through the tools may store: content within
    BB_MAX_BODY_BYTES (offloaded past BB_OFFLOAD_BYTES, as a write would), a digest as
    update_state takes one, an author name without control characters, sources and links
    that are notes of the workspace, whole numbers no client misreads, times every read can
    show, an origin as a source summary writes one, confidence from 0 to 1, and columns only
    on a table note whose content is exactly their TSV. The stored size and token counts are
    not taken from the file: the import computes them from the content.
    """
    limits = limits or ImportLimits()
    max_body_bytes = limits.max_body_bytes
    if not isinstance(record, dict):
        raise InvalidArgument("a note record must be a JSON object")
    address = parse_address(record.get("uri"))
    current = None
    if address.version is not None:
        # A kept past version of a note, as format 2 exports them.
        current = (
            _need(record, "current_version", int),
            check_digest(record.get("current_digest")),
        )
        if not address.version < current[0] <= MAX_SAFE_INTEGER:
            raise InvalidArgument(
                "a past version's number is below its note's current_version", argument="uri"
            )
        if record.get("links"):
            raise InvalidArgument("a past version carries no links", argument="links")
    if address.workspace != source:
        raise InvalidArgument(f"{address.uri} is not in workspace {source}", argument="uri")
    kind = _need(record, "kind", str)
    if kind not in KINDS:
        raise InvalidArgument(f"kind must be one of {', '.join(KINDS)}", argument="kind")
    content = _need(record, "content", str).encode("utf-8")
    if len(content) > max_body_bytes:
        raise TooLarge(
            f"the content has {len(content)} bytes; this board takes at most {max_body_bytes} "
            "(BB_MAX_BODY_BYTES)",
            argument="content",
            hint="raise BB_MAX_BODY_BYTES to at least the exporting board's, or split the note",
        )
    # A large body is kept outside the note, whatever the file says, as a write keeps it.
    offloaded = _need(record, "offloaded", bool) or len(content) > limits.offload_bytes
    columns = record.get("columns")
    if kind == "table":
        columns = _check_table(columns, content)
    elif columns:
        raise InvalidArgument(f"a {kind} note has no columns", argument="columns")
    else:
        columns = None
    sources = _need(record, "sources", list)
    if len(sources) > MAX_SOURCES:
        raise TooLarge(f"{len(sources)} sources; the limit is {MAX_SOURCES}", argument="sources")
    for value in sources:
        # As a write holds them: addresses of notes in the same workspace.
        parsed = parse_address(value, argument="sources").require_note("sources")
        if parsed.workspace != source:
            raise InvalidArgument(
                f"source {parsed.uri} is in another workspace", argument="sources"
            )
    # A source in the exported workspace moves with it, as links do.
    old, new = f"{SCHEME}{source}/", f"{SCHEME}{target}/"
    sources = [new + s[len(old) :] for s in sources]
    source_at = record.get("source_at")
    if source_at is not None and not (
        isinstance(source_at, list)
        and len(source_at) == len(sources)
        and all(_is_version(v) for v in source_at)
    ):
        raise InvalidArgument(
            "source_at must be one version (a whole number from 1) per source",
            argument="source_at",
        )
    confidence = check_confidence(record.get("confidence"))
    numbers = {name: _need(record, name, int) for name in (*_INT_FIELDS, *_TIME_FIELDS)}
    if numbers["version"] < 1:
        raise InvalidArgument("version must be 1 or more", argument="version")
    for name, value in numbers.items():
        highest = MAX_TIME_MS if name in _TIME_FIELDS else MAX_SAFE_INTEGER
        if not 0 <= value <= highest:
            raise InvalidArgument(f"{name} must be from 0 to {highest}", argument=name)
    origin = _need(record, "origin", str)
    if len(origin) > MAX_ORIGIN_CHARS or not origin.isprintable():
        raise InvalidArgument(
            f"origin must be at most {MAX_ORIGIN_CHARS} printable characters", argument="origin"
        )
    digest = check_digest(record.get("digest"))
    author = _need(record, "author", str)
    if len(author) > MAX_AUTHOR_CHARS or not author.isprintable():
        raise InvalidArgument(
            f"author must be at most {MAX_AUTHOR_CHARS} printable characters", argument="author"
        )
    links = []
    for link in _need(record, "links", list):
        if not isinstance(link, dict) or link.get("rel") not in RELATIONS:
            raise InvalidArgument("each link is {rel, to} with a known rel", argument="links")
        to = parse_address(link.get("to"), argument="links").require_note("links")
        if to.workspace != source:
            raise InvalidArgument(f"{to.uri} is in another workspace", argument="links")
        at = link.get("at")
        if at is not None and not (
            isinstance(at, list) and len(at) == 2 and all(_is_version(v) for v in at)
        ):
            raise InvalidArgument(
                "a link's at is the versions of its two ends: two whole numbers from 1",
                argument="links",
            )
        links.append((str(link["rel"]), to.member, encode_record(*at) if at else ""))
    moved = Address(target, address.topic, address.path, address.version)
    blob = hashlib.sha256(content).hexdigest() if offloaded else ""
    fields: dict[str, str | int | float] = {
        "ws": target,
        "topic": moved.topic,
        "kind": kind,
        "digest": digest,
        "body": "" if offloaded else content.decode(),
        "blob": blob,
        "stext": content[:SEARCH_TEXT_BYTES].decode("utf-8", "ignore") if offloaded else "",
        "author": author,
        "sources": orjson.dumps(sources).decode(),
        "source_at": orjson.dumps(source_at).decode() if source_at else "",
        "confidence": "" if confidence is None else float(confidence),
        "columns": orjson.dumps(columns).decode() if columns is not None else "",
        "origin": origin,
        **numbers,
        # What the content is, not what the file says it is.
        "size": len(content),
        "nrows": content.count(b"\n") if kind == "table" else 0,
    }
    if current is not None:
        fields["seq"] = 0  # a kept version's sequence number does not travel
        if numbers["version"] != address.version:
            raise InvalidArgument("version must be the one its uri names", argument="version")
    return Imported(moved, fields, content, offloaded, tuple(links), current)


@dataclass
class ImportReport:
    imported: int = 0
    replaced: int = 0
    skipped: int = 0
    # Notes an earlier, interrupted run of the same import wrote: kept, their links added.
    resumed: int = 0
    links: int = 0
    links_skipped: int = 0
    # The links the file gives the notes it skipped: left as the board has them.
    links_of_skipped: int = 0
    # Kept past versions added to the notes this import wrote (format 2 files).
    versions: int = 0


# (pass, records done in it): "notes" first, then "links", after every batch.
Progress = Callable[[str, int], None]


async def import_notes(
    client: RedisCommands,
    records: Callable[[], Iterable[Imported]],
    *,
    workspace: str,
    replace: bool,
    author: str,
    changelog_maxlen: int,
    counter: TokenCounter,
    progress: Progress | None = None,
) -> ImportReport:
    """Write checked records into ``workspace``: an existing note is kept unless ``replace``.

    Running the same import again after an interruption completes it: a note already there
    with the record's version and digest is taken as written by the earlier run, and gets
    its links in the second pass like the notes written now.

    ``records()`` is called once per pass and must give the same records each time: the notes
    are written first, then their links (a link's target may come later in the file). Only a
    batch of records is held at a time, and one bit per record (written or skipped), so an
    export file can be read again for each pass rather than held.
    """
    report = ImportReport()
    # Sent by hash (EVALSHA), not as text with every note: the script is most of the bytes of
    # a small note's command. A pipeline loads a script Redis does not have before it runs.
    redis = client.redis
    write_note, add_links = redis.register_script(_IMPORT), redis.register_script(_LINK)
    add_version = redis.register_script(_IMPORT_VERSION)
    written = bytearray()  # bit i: the i-th record was written (not skipped)
    index = 0
    # One deadline per batch's round trip, not one for the whole import: an import of any
    # size (or read from a slow source) is bounded by how long Redis takes per batch. The
    # workspace registry is the caller's (Board.import_notes): on a cluster it is another
    # slot's key.
    for batch in _batches(records()):
        if replace:
            gone = await delete_members(
                client,
                workspace,
                [n.address.member for n in batch],
                author=author,
                changelog_maxlen=changelog_maxlen,
            )
            report.replaced += len(gone)
        pipe = client.redis.pipeline(transaction=False)
        for note in batch:
            _count_tokens(note, counter)
            if note.current is None:
                await _queue_import(
                    pipe, write_note, note, author=author, changelog_maxlen=changelog_maxlen
                )
        async with client.operation():
            seqs = iter(await pipe.execute())
        for note in batch:
            if index % 8 == 0:
                written.append(0)
            if note.current is not None:
                index += 1  # a past version: added in the second pass, to its note
                continue
            seq = next(seqs)
            if seq:
                written[index // 8] |= 1 << index % 8
                if seq > 0:
                    report.imported += 1
                else:
                    report.resumed += 1
            else:
                report.skipped += 1
            index += 1
        if progress is not None:
            progress("notes", index)
    index = 0
    for batch in _batches(records()):
        chosen = []
        versions = []
        for note in batch:
            if note.current is not None:
                # Its note may come later in the file: every note is written by now.
                versions.append(note)
            elif index < 8 * len(written) and written[index // 8] >> index % 8 & 1:
                chosen.append(note)
            else:
                report.links_of_skipped += len(note.links)
            index += 1
        pipe = client.redis.pipeline(transaction=False)
        for note in chosen:
            await _queue_links(pipe, add_links, note)
        for version in versions:
            await _queue_version(pipe, add_version, version)
        async with client.operation():
            added = iter(await pipe.execute())
        for note, count in zip(chosen, added, strict=False):
            report.links += int(count)
            report.links_skipped += len(note.links) - int(count)
        report.versions += sum(int(count) for count in added)
        if progress is not None:
            progress("links", index)
    return report


def _count_tokens(note: Imported, counter: TokenCounter) -> None:
    # As a write counts them (store/notes/_writes.py): the budget planner trusts these.
    digest_tokens = counter.count(str(note.fields["digest"]))
    body_tokens = count_as_json_string(counter, note.content.decode("utf-8"))
    note.fields["digest_tokens"] = digest_tokens
    note.fields["body_tokens"] = body_tokens
    note.fields["est_tokens"] = digest_tokens + body_tokens


def _batches(records: Iterable[Imported]) -> Iterator[list[Imported]]:
    batch: list[Imported] = []
    for record in records:
        batch.append(record)
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def _queue_import(
    pipe: Any, script: Any, note: Imported, *, author: str, changelog_maxlen: int
) -> None:
    ws, topic, path = note.address.workspace, note.address.topic, note.address.path
    blob = str(note.fields["blob"])
    flat = [v for name, value in note.fields.items() for v in (STORED_NAMES[name], value)]
    await script(
        keys=(
            keys.note(ws, note.address.member),
            keys.sequence(ws),
            keys.changelog(ws),
            keys.by_name(ws, topic),
            keys.by_version(ws, topic),
            keys.by_kind(ws, topic, str(note.fields["kind"])),
            keys.topics(ws),
            keys.blob_refs(ws),
            keys.blob(ws, blob),
        ),
        args=(
            path,
            str(changelog_maxlen),
            note.address.uri,
            str(note.fields["version"]),
            author,
            blob,
            topic,
            note.content if blob else b"",
            *flat,
        ),
        client=pipe,
    )


async def _queue_version(pipe: Any, script: Any, version: Imported) -> None:
    address = version.address
    assert version.current is not None and address.version is not None
    ws, member = address.workspace, address.member
    blob = str(version.fields["blob"])
    fields = {k: v for k, v in version.fields.items() if k != "stext"}
    await script(
        keys=(
            keys.note(ws, member),
            keys.version(ws, member, address.version),
            keys.versions(ws, member),
            keys.blob_refs(ws),
            keys.blob(ws, blob),
            keys.version_times(ws),
        ),
        args=(
            str(version.current[0]),
            version.current[1],
            str(address.version),
            blob,
            version.content if blob else b"",
            f"{member}@{address.version}",
            str(version.fields["updated"]),
            *[v for name, value in fields.items() for v in (STORED_NAMES[name], value)],
        ),
        client=pipe,
    )


async def _queue_links(pipe: Any, script: Any, note: Imported) -> None:
    ws, member = note.address.workspace, note.address.member
    if not note.links:
        pipe.echo(0)
        return
    await script(
        keys=(keys.note(ws, member), keys.links_out(ws, member), keys.links_at(ws, member)),
        args=(
            member,
            keys.note(ws, ""),
            keys.links_in(ws, ""),
            *[v for link in note.links for v in link],
        ),
        client=pipe,
    )
