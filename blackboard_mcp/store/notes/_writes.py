"""update_state: compare-and-swap writes and large-content offload, in one transaction.

Appends have their own path (store/notes/_appends.py): they take no expected version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import orjson

from .._errors import Conflict, NotFound
from ..connection import _key_names as keys
from ..connection._board_client import BoardClient
from ..connection._field_names import FIELD
from ..connection._tx import Gate, ReplicaWait, Transaction
from ._commit import WriteCommands, queue_write
from ._history import HistoryLimits
from ._notes import NoteWrite
from ._tokencount import TokenCounter, count_as_json_string_off_loop

# An offloaded body keeps this much of its text beside the note for the search index, so
# large notes stay findable without every read of the note carrying the whole body.
# RediSearch indexes a note's hash whole on every change to it, so this bounds what each
# write (an append to a long log included) costs Redis to index (bench/append_load.py).
SEARCH_TEXT_BYTES = 16 * 1024


class WriteResult(TypedDict):
    version: int
    digest: str
    warnings: list[str]


@dataclass(frozen=True)
class WriteLimits:
    offload_bytes: int
    max_body_bytes: int
    changelog_maxlen: int
    max_retries: int
    wait: ReplicaWait | None = None
    history: HistoryLimits = field(default_factory=HistoryLimits)


def _decode(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


async def write_note(
    client: BoardClient,
    write: NoteWrite,
    *,
    counter: TokenCounter,
    limits: WriteLimits,
    may_read: bool = True,
    gate: Gate | None = None,
    registry: str | None = None,
) -> WriteResult:
    """Apply one validated write; raise Conflict (nothing written) on a stale expect_version.

    ``may_read`` says whether the writer may read the note's topic. A writer that may not
    learns the note's version (it needs it for expect_version) but nothing of its content:
    no digest in a conflict, no stored size or kind in a refused append. ``registry``: the
    workspace registry's key, when it is on the note's node; a note's first version adds
    its workspace there in its own transaction.
    """
    if write.append is not None:
        raise ValueError("an append is written by append_note (store/notes/_appends.py)")
    ws = write.address.workspace
    member = write.address.member
    note_key = keys.note(ws, member)
    refs_key = keys.blob_refs(ws)
    warnings = list(write.warnings)
    if write.expect_version is None:
        warnings.append(
            "written without expect_version: a concurrent write could have been overwritten; "
            "pass the version you read"
        )
    digest_tokens = counter.count(write.digest)
    # Token counting happens once here, outside the transaction.
    content = _content(write)
    content_tokens = await count_as_json_string_off_loop(counter, content)

    source_keys = [keys.note(ws, source.member) for source in write.sources]

    async def body(tx: Transaction, first: list[Any]) -> Callable[[list[Any]], WriteResult]:
        old = first[0]
        # Each source must exist, as a link's ends must; its version now is recorded with the
        # write (store/notes/_provenance.py). Under WATCH: a source deleted or written before
        # EXEC makes this run again.
        source_versions = first[1:]
        missing = list(
            dict.fromkeys(
                s.uri for s, v in zip(write.sources, source_versions, strict=True) if v is None
            )
        )
        if missing:
            raise NotFound(f"no note at {', '.join(missing)}", uris=missing)
        old_version = int(old[0]) if old[0] is not None else 0
        old_blob = _decode(old[2])
        old_kind = _decode(old[3]) or write.kind
        if write.expect_version is not None and write.expect_version != old_version:
            current = _decode(old[1])
            if write.expect_version == 0:
                message = f"{write.address.uri} already exists at version {old_version}"
            elif old_version == 0:
                message = (
                    f"{write.address.uri} does not exist (expected version {write.expect_version})"
                )
            else:
                message = (
                    f"{write.address.uri} is at version {old_version}, not {write.expect_version}"
                )
            yours = old_version == write.expect_version + 1 and await _is_this_write(
                tx, note_key, write, content, digest=current, kind=old_kind
            )
            raise Conflict(
                message,
                current_version=old_version,
                current_digest=current if may_read else None,
                yours=yours,
            )

        kind = write.kind
        encoded = content.encode("utf-8")
        new_blob = ""
        if len(encoded) > limits.offload_bytes:
            new_blob = hashlib.sha256(encoded).hexdigest()
        blob_counts: list[int] = []
        if old_blob or new_blob:
            # The reference counts decide whether a blob can be deleted, so they are part
            # of what this transaction depends on.
            await tx.watch(refs_key)
            names = [n for n in (old_blob, new_blob) if n]
            blob_counts = [int(c or 0) for c in await tx.read("HMGET", refs_key, *names)]

        version = old_version + 1
        record: dict[str, bytes | float | int | str] = {
            FIELD.ws: ws,
            FIELD.topic: write.address.topic,
            FIELD.kind: kind,
            FIELD.digest: write.digest,
            FIELD.body: "" if new_blob else content,
            FIELD.blob: new_blob,
            FIELD.stext: encoded[:SEARCH_TEXT_BYTES].decode("utf-8", "ignore") if new_blob else "",
            FIELD.size: len(encoded),
            FIELD.version: version,
            FIELD.author: write.author,
            FIELD.sources: orjson.dumps([s.uri for s in write.sources]).decode(),
            FIELD.source_at: orjson.dumps([int(v) for v in source_versions]).decode()
            if write.sources
            else "",
            FIELD.confidence: "" if write.confidence is None else write.confidence,
            FIELD.est_tokens: digest_tokens + content_tokens,
            FIELD.digest_tokens: digest_tokens,
            FIELD.body_tokens: content_tokens,
            FIELD.columns: orjson.dumps(list(write.table.columns)).decode() if write.table else "",
            FIELD.nrows: len(write.table.rows) if write.table else 0,
            FIELD.origin: write.origin,
        }
        tx.multi()
        # The script keeps the old version first, while the note is still that version.
        commands = WriteCommands()
        # A kept version holds a reference of its own to the old blob, so the note's own
        # reference can go without the blob going with it.
        kept_blob = bool(old_version and limits.history.versions > 0)
        if new_blob != old_blob:
            if new_blob:
                commands.add("SET", keys.blob(ws, new_blob), encoded, "NX")
                commands.add("HINCRBY", refs_key, new_blob, 1)
            if old_blob:
                if not kept_blob and blob_counts and blob_counts[0] <= 1:
                    commands.add("DEL", keys.blob(ws, old_blob))
                    commands.add("HDEL", refs_key, old_blob)
                else:
                    commands.add("HINCRBY", refs_key, old_blob, -1)
        topic = write.address.topic
        path = write.address.path
        if old_version and old_kind != kind:
            commands.add("ZREM", keys.by_kind(ws, topic, old_kind), path)
        if registry is not None and not old_version:
            commands.add("SADD", registry, ws)
        commands.add("SADD", keys.topics(ws), topic)
        commands.add("ZADD", keys.by_name(ws, topic), 0, path)
        commands.add("ZADD", keys.by_version(ws, topic), version, path)
        queue_write(
            tx,
            workspace=ws,
            topic=topic,
            member=member,
            kind=kind,
            op="create" if not old_version else "update",
            uri=write.address.uri,
            version=version,
            author=write.author,
            changelog_maxlen=limits.changelog_maxlen,
            history=limits.history,
            commands=commands,
            note_fields=record,
            is_new=not old_version,
        )

        def finish(_replies: list[Any]) -> WriteResult:
            return {"version": version, "digest": write.digest, "warnings": warnings}

        return finish

    return await client.transaction(
        [note_key, *source_keys],
        body,
        max_retries=limits.max_retries,
        # Read with the WATCH, in its round trip (store/connection/_tx.py).
        first_reads=[
            ("HMGET", note_key, FIELD.version, FIELD.digest, FIELD.blob, FIELD.kind),
            *(("HGET", key, FIELD.version) for key in source_keys),
        ],
        gate=gate,
        wait=limits.wait,
    )


async def _is_this_write(
    tx: Transaction, note_key: str, write: NoteWrite, content: str, *, digest: str, kind: str
) -> bool:
    """Whether the note's current version is what ``write`` makes: the same author, digest,
    kind, columns and content. A retry whose first try landed (its answer lost) is told so.

    Read under the transaction's WATCH, only on a conflict that could be one: the current
    version is one past the version the write expects."""
    if digest != write.digest or kind != write.kind:
        return False
    author, body, blob, columns = (
        _decode(v)
        for v in await tx.read(
            "HMGET", note_key, FIELD.author, FIELD.body, FIELD.blob, FIELD.columns
        )
    )
    wanted_columns = orjson.dumps(list(write.table.columns)).decode() if write.table else ""
    if author != write.author or columns != wanted_columns:
        return False
    if blob:
        return blob == hashlib.sha256(content.encode("utf-8")).hexdigest()
    return body == content


def _content(write: NoteWrite) -> str:
    if write.table is not None:
        return write.table.to_tsv()
    return write.body or ""
