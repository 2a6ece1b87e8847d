"""Scripts sent by their SHA1, with their text only when the Redis lacks them.

Every write runs Lua scripts of a few KB (the admission, the write's own script); sent as
``EVAL`` with their text, Redis parses and hashes that text on every call, and it was most of
the bytes of a write. Sent as ``EVALSHA`` they are 40 bytes, but a Redis may lack them: one
restarted or failed over, or whose cache was flushed (``SCRIPT FLUSH``) or evicted an
``EVAL``'d script (Redis 7.4 and later). It then answers ``NOSCRIPT`` and runs nothing of
that command, which is what makes sending by hash safe where it is allowed:

- **A plain round trip** (independent commands, a transaction's WATCH and reads, a gate)
  sends every script by hash. A script answered ``NOSCRIPT`` did not run: it is loaded with
  ``SCRIPT LOAD`` (which Redis never evicts) and sent again, in one more round trip, with a
  trailing ``WAIT`` so that the acknowledgement still follows the write.
- **Inside MULTI**, a command answered ``NOSCRIPT`` would not stop the others of the EXEC, and
  half a write would stand. So a transaction sends by hash only when its MULTI holds that
  script alone: then ``NOSCRIPT`` means nothing ran, and the transaction loads the script and
  runs again, with its text this time, so never more than once (store/connection/_tx.py). A
  MULTI of several commands sends its scripts as text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from redis.exceptions import NoScriptError

from ._wire import WireConnection, first_error, pack

Command = tuple[Any, ...]

# The store's scripts are constants of its modules: a few texts, each hashed once.
_SHAS: dict[str, str] = {}


def sha_of(script: str) -> str:
    """The SHA1 Redis names ``script`` by (each script text is hashed once a process)."""
    sha = _SHAS.get(script)
    if sha is None:
        digest = hashlib.sha1(script.encode("utf-8"), usedforsecurity=False)
        sha = _SHAS[script] = digest.hexdigest()
    return sha


def by_hash(command: Command) -> Command:
    """``command``, an ``EVAL`` sent as ``EVALSHA``; any other command as it is."""
    if command[0] == "EVAL":
        return ("EVALSHA", sha_of(command[1]), *command[2:])
    return command


def all_by_hash(commands: Sequence[Command]) -> list[Command]:
    # by_hash, inlined: a read's round trip is tens of commands.
    return [("EVALSHA", sha_of(c[1]), *c[2:]) if c[0] == "EVAL" else c for c in commands]


def missed(replies: Sequence[Any]) -> list[int]:
    """Where ``replies`` say a script was not loaded (its command did not run)."""
    return [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]


def _loads(commands: Sequence[Command]) -> list[Command]:
    """``SCRIPT LOAD`` of each script ``commands`` send (each once)."""
    texts = dict.fromkeys(command[1] for command in commands if command[0] == "EVAL")
    return [("SCRIPT", "LOAD", text) for text in texts]


async def load(wire: WireConnection, commands: Sequence[Command]) -> None:
    """Load on ``wire``'s Redis every script ``commands`` send."""
    scripts = _loads(commands)
    first_error(await wire.round_trip(pack(scripts), len(scripts)))


async def completed(
    wire: WireConnection, commands: Sequence[Command], replies: list[Any]
) -> list[Any]:
    """``replies`` to ``commands`` (sent with ``all_by_hash``), where each script Redis did not
    have was not run: those are loaded and run on ``wire`` in one more round trip, with the
    first try's trailing ``WAIT`` (an acknowledgement must follow every write it vouches
    for), and their replies put in place."""
    failed = missed(replies)
    if not failed:
        return replies
    scripts = _loads([commands[i] for i in failed])
    again = [by_hash(commands[i]) for i in failed]
    waits = bool(commands) and commands[-1][0] == "WAIT"
    if waits:
        again.append(commands[-1])
    answers = await wire.round_trip(pack([*scripts, *again]), len(scripts) + len(again))
    first_error(answers[: len(scripts)])
    for index, answer in zip(failed, answers[len(scripts) :], strict=False):
        replies[index] = answer
    if waits:
        replies[-1] = answers[-1]
    return replies
