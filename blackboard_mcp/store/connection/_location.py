"""Where a Redis is, said without its password: for log lines and error messages."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_HIDDEN = "***"


def redacted_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (in the authority and in the query)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        # Not even a URL (a bad port, say): show only its scheme, which holds no secret.
        return url.split(":", 1)[0] + ":" + _HIDDEN
    netloc = parts.netloc
    if password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{_HIDDEN}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, _HIDDEN if k == "password" else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def settings_location(connection_class: type[Any], kwargs: Mapping[str, Any]) -> str:
    """The Redis a pool's connections (of ``connection_class``, built from ``kwargs``) go
    to, as a URL that never carries the password."""
    db = kwargs.get("db", 0)
    if "path" in kwargs:
        return f"unix://{kwargs['path']}?db={db}"
    scheme = "rediss" if "SSL" in connection_class.__name__ else "redis"
    return f"{scheme}://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{db}"


def failure_reason(exc: BaseException) -> str:
    """The innermost cause of a failure, in one line: what a log line or message should say.

    Not past a timeout or a cancellation: under a deadline those are the mechanism, and the
    error raised from them ("did not answer within 5 s") is the reason.
    """
    while exc.__cause__ is not None and not isinstance(
        exc.__cause__, TimeoutError | asyncio.CancelledError
    ):
        exc = exc.__cause__
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
