"""Redis key names. Nothing outside the store sees these.

The key kind comes first and the workspace is a ``{hash tag}`` next, so that a RediSearch
prefix can select one kind and Redis Cluster keeps a whole workspace in one slot (every
transaction touches one workspace only).
"""

from __future__ import annotations

NOTE_PREFIX = "bbn:"
INDEX_NAME = "bb-notes-v5"
# The digests-only index beside each notes index (store/connection/_search_index.py): its
# name with this prefix.
DIGEST_INDEX_PREFIX = "bb-digests-v3"
# Earlier versions' indexes over the same notes, dropped (never with DD) when a board starts.
RETIRED_INDEX_NAMES = (
    "bb-notes-v1",
    "bb-notes-v2",
    "bb-notes-v3",
    "bb-notes-v4",
    "bb-digests-v1",
    "bb-digests-v2",
)


def digest_index(index: str) -> str:
    """The digests index that goes with the notes index ``index`` (a cluster primary's too).

    A primary's index is ``INDEX_NAME`` plus a hash tag; its digests index keeps the tag.
    """
    return DIGEST_INDEX_PREFIX + index.removeprefix(INDEX_NAME)


def note(workspace: str, member: str) -> str:
    return f"{NOTE_PREFIX}{{{workspace}}}:{member}"


VERSION_PREFIX = "bbh:"


def version(workspace: str, member: str, version: int | str) -> str:
    """A kept past version of a note (store/notes/_history.py): a copy of its hash."""
    return f"{VERSION_PREFIX}{{{workspace}}}:{member}@{version}"


def versions(workspace: str, member: str) -> str:
    """The versions kept of a note: a sorted set, each version scored by its number."""
    return f"bbhv:{{{workspace}}}:{member}"


def version_times(workspace: str) -> str:
    """Every kept version of a workspace (``<member>@<version>``) scored by its write time:
    what the retention sweep expires by age."""
    return f"bbhx:{{{workspace}}}"


def blob(workspace: str, sha256: str) -> str:
    return f"bbb:{{{workspace}}}:{sha256}"


def blob_refs(workspace: str) -> str:
    return f"bbr:{{{workspace}}}"


def sequence(workspace: str) -> str:
    return f"bbq:{{{workspace}}}"


def changelog(workspace: str) -> str:
    return f"bbc:{{{workspace}}}"


def topics(workspace: str) -> str:
    return f"bbw:{{{workspace}}}"


def by_recent(workspace: str, topic: str) -> str:
    """Earlier versions' set of a topic's notes by recency, no longer written (_retired_keys.py)."""
    return f"bbt:{{{workspace}}}:{topic}"


def by_kind(workspace: str, topic: str, kind: str) -> str:
    return f"bbtk:{{{workspace}}}:{topic}:{kind}"


def by_name(workspace: str, topic: str) -> str:
    return f"bbtn:{{{workspace}}}:{topic}"


def by_version(workspace: str, topic: str) -> str:
    return f"bbtv:{{{workspace}}}:{topic}"


def links_out(workspace: str, member: str) -> str:
    return f"bblo:{{{workspace}}}:{member}"


def links_in(workspace: str, member: str) -> str:
    return f"bbli:{{{workspace}}}:{member}"


def links_at(workspace: str, member: str) -> str:
    """The versions a note's outgoing links were made at: a hash, ``<rel>\t<target member>``
    to ``<source version>\t<target version>`` (store/notes/_provenance.py)."""
    return f"bbla:{{{workspace}}}:{member}"


def revoked_token(workspace: str, token_id: str) -> str:
    return f"bbrv:{{{workspace}}}:t:{token_id}"


def revoked_subject(workspace: str, subject: str) -> str:
    return f"bbrv:{{{workspace}}}:s:{subject}"


def issued_tokens(workspace: str) -> str:
    """Hash: token id -> the record of a token the board issued (auth/_inventory.py)."""
    return f"bbtk:{{{workspace}}}"


def issued_expiry(workspace: str) -> str:
    """Sorted set: token id by its expiry, to drop the records of expired tokens."""
    return f"bbtkx:{{{workspace}}}"


def token_last_used(workspace: str) -> str:
    """Hash: token id -> the unix second a call of it was last admitted (to the minute)."""
    return f"bbtku:{{{workspace}}}"


def rate_window(workspace: str, subject: str) -> str:
    return f"bbrl:{{{workspace}}}:w:{subject}"


def deleted(workspace: str) -> str:
    """Deleted notes (``<topic>/<path>``) scored by the sequence number of their deletion."""
    return f"bbx:{{{workspace}}}"


def retention(workspace: str) -> str:
    """Maximum ages in seconds: the workspace's under ``*``, a topic's under its name."""
    return f"bbret:{{{workspace}}}"


def retention_lease() -> str:
    """Held by the one gateway process that sweeps expired notes, for a while."""
    return "bblease:retention"


def member_prefixes(workspace: str) -> dict[str, str]:
    """Prefixes that a server-side script completes with a member, a topic or a blob name.

    The delete script finds the keys of the notes it removes (and of their links' other ends)
    as it goes; each prefix plus a name is exactly what the function of the same name above
    returns, and a test holds them to that. Every one of them carries the workspace's hash tag.
    """
    return {
        "note": note(workspace, ""),
        "links_out": links_out(workspace, ""),
        "links_in": links_in(workspace, ""),
        "links_at": links_at(workspace, ""),
        # Earlier versions' sets: a delete still removes its notes from any left behind.
        "by_recent": by_recent(workspace, ""),
        "by_name": by_name(workspace, ""),
        "by_version": by_version(workspace, ""),
        # by_kind is <prefix><topic>:<kind>
        "by_kind": by_kind(workspace, "", "")[:-1],
        "blob": blob(workspace, ""),
        # A kept version is <prefix><member>@<version>.
        "version": version(workspace, "", "")[:-1],
        "versions": versions(workspace, ""),
        "version_times": version_times(workspace),
    }


def field_layout() -> str:
    """The layout of note fields the board's notes are all in (connection/_field_layout.py)."""
    return "bbfields"


def workspaces() -> str:
    """The workspaces written to and not deleted since (health, audit tail, the sweep)."""
    return "bbws"
