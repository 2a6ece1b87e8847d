"""Which subject and workspace names a token may carry.

Both end up in audit lines, log lines and Redis key names (the workspace as a Cluster hash
tag), so neither may hold a control character, a tab, a brace or a space. The workspace
pattern is the store's address pattern for a workspace: a token for a workspace no address
can name would be useless, and one with a ``}`` would move its keys to another slot.
"""

from __future__ import annotations

import re

# Every capability a token can carry: the board's contract requires the last three of tools
# (board.tb), the admin endpoints require ``admin``.
CAPABILITIES = ("admin", "board_read", "board_write", "file_read")
SUBJECT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}"
WORKSPACE_PATTERN = r"[a-z0-9][a-z0-9._-]{0,63}"
# Token ids (jti) are ours (hex) or another issuer's: any printable ASCII without spaces.
TOKEN_ID_PATTERN = r"[!-~]{1,128}"
_TOKEN_ID = re.compile(TOKEN_ID_PATTERN)
_SUBJECT = re.compile(SUBJECT_PATTERN)
_WORKSPACE = re.compile(WORKSPACE_PATTERN)


def is_subject(value: object) -> bool:
    return isinstance(value, str) and _SUBJECT.fullmatch(value) is not None


def is_workspace(value: object) -> bool:
    return isinstance(value, str) and _WORKSPACE.fullmatch(value) is not None


def is_token_id(value: object) -> bool:
    return isinstance(value, str) and _TOKEN_ID.fullmatch(value) is not None
