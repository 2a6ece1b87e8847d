"""An external issuer's signing keys: fetched, cached, bounded.

The fetch is blocking I/O (urllib), so it runs on a worker thread and a verification waits
for it no longer than the fetch timeout: a slow or dead identity provider makes calls fail
with ``unavailable``, never hangs them or the event loop. Every document (metadata and JWKS)
is read with a size cap and a deadline for the whole body, so whoever answers for the IdP
cannot keep that thread reading, or growing its memory, with an endless or trickled body.

A token naming a key id that is not in the cached set makes the set be fetched again (the
IdP may have rotated its keys), at most once per ``refetch_seconds``, so a stream of tokens
with made-up key ids cannot turn the gateway into a load generator against the IdP.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import math
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from jwt import PyJWK, PyJWKSet

from ._errors import KeysUnavailable, UnknownKey

log = logging.getLogger(__name__)

# Signature algorithms an external token may use, by key type. Never HMAC: a JWKS publishes
# public keys, and a token "signed" with one as an HMAC secret must not pass.
_RSA = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
ASYMMETRIC = frozenset([*_RSA, "ES256", "ES384", "ES512", "ES256K", "EdDSA"])
# Metadata and JWKS documents: a real one is a few KB (a JWKS of 20 RSA-4096 keys is 20 KB).
_MAX_DOCUMENT_BYTES = 256 * 1024
_READ_BYTES = 64 * 1024


def algorithms_for(key: PyJWK) -> list[str]:
    """The algorithms ``key`` may verify: its own ``alg`` when the JWK names one."""
    if "alg" in key._jwk_data:
        named = str(key._jwk_data["alg"])
        return [named] if named in ASYMMETRIC else []
    if key.key_type == "RSA":
        return list(_RSA)
    return [key.algorithm_name] if key.algorithm_name in ASYMMETRIC else []


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may live, in the order the MCP authorization spec tries:
    RFC 8414 (well-known inserted before the path), then OpenID Connect Discovery."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(well_known_path: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, well_known_path, "", ""))

    if not path:
        return [
            at("/.well-known/oauth-authorization-server"),
            at("/.well-known/openid-configuration"),
        ]
    return [
        at(f"/.well-known/oauth-authorization-server{path}"),
        at(f"/.well-known/openid-configuration{path}"),
        at(f"{path}/.well-known/openid-configuration"),
    ]


class KeySource:
    """One JWKS document, by URL or found through an issuer's metadata."""

    def __init__(
        self,
        *,
        jwks_url: str | None = None,
        issuer: str | None = None,
        timeout_seconds: float = 5.0,
        cache_seconds: float = 300.0,
        refetch_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if jwks_url is None and issuer is None:
            raise ValueError("a key source needs a JWKS URL or an issuer to discover it from")
        self._jwks_url = jwks_url
        self._issuer = issuer
        self._timeout = timeout_seconds
        self._cache_seconds = cache_seconds
        self._refetch_seconds = refetch_seconds
        # What the cache's age and the refetch interval are measured on.
        self._clock = clock
        self._keys: dict[str | None, PyJWK] = {}
        self._fetched_at = -math.inf
        self._attempted_at = -math.inf
        self._lock: asyncio.Lock | None = None

    async def key(self, kid: str | None) -> PyJWK:
        """The key ``kid`` names (or the only key, for a token without a kid)."""
        if self._wants_fetch(kid):
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                # Whoever held the lock may have fetched already: check again.
                if self._wants_fetch(kid):
                    await self._refresh()
        found = self._lookup(kid)
        if found is not None:
            return found
        if math.isinf(self._fetched_at):
            raise KeysUnavailable("the identity provider's signing keys could not be fetched")
        raise UnknownKey(f"the token's key id {kid!r} is not in the issuer's key set")

    def _lookup(self, kid: str | None) -> PyJWK | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid) if kid is not None else None

    def _wants_fetch(self, kid: str | None) -> bool:
        now = self._clock()
        if now - self._attempted_at < self._refetch_seconds:
            return False
        stale = now - self._fetched_at >= self._cache_seconds
        return stale or self._lookup(kid) is None

    async def _refresh(self) -> None:
        self._attempted_at = self._clock()
        try:
            # The thread is left to finish on its own when the wait ends: urllib's own
            # timeout bounds it too.
            keys = await asyncio.wait_for(
                asyncio.to_thread(self._fetch), timeout=2 * self._timeout + 1
            )
        except Exception as exc:  # any failure: keep the keys we have, if any
            log.warning(
                "could not fetch the signing keys of %s: %s: %s",
                self._jwks_url or self._issuer,
                exc.__class__.__name__,
                str(exc)[:200],
            )
            return
        self._keys = keys
        self._fetched_at = self._clock()

    def _fetch(self) -> dict[str | None, PyJWK]:
        if self._jwks_url is None:
            assert self._issuer is not None
            self._jwks_url = self._discover(self._issuer)
        # Not PyJWKClient: it reads the whole body, with no cap on its size or its time.
        key_set = PyJWKSet.from_dict(_get_json(self._jwks_url, self._timeout, "JWKS"))
        keys: dict[str | None, PyJWK] = {}
        for key in key_set.keys:
            # Keys for encryption, and anything that is not a public signature key, are
            # not ours to verify with.
            if key.public_key_use not in (None, "sig") or not algorithms_for(key):
                continue
            keys[key.key_id] = key
        if not keys:
            raise KeysUnavailable("the key set holds no public signature keys")
        return keys

    def _discover(self, issuer: str) -> str:
        for url in metadata_urls(issuer):
            try:
                document = _get_json(url, self._timeout, "metadata")
            except (OSError, ValueError):
                continue
            # RFC 8414 section 3.3: the document must be the issuer's own.
            if document.get("issuer") != issuer:
                log.warning("metadata at %s names another issuer; ignored", url)
                continue
            jwks_uri = document.get("jwks_uri")
            if isinstance(jwks_uri, str) and urlsplit(jwks_uri).scheme in ("https", "http"):
                return jwks_uri
        raise KeysUnavailable(f"no metadata with a jwks_uri found for issuer {issuer}")


def _get_json(url: str, timeout: float, what: str) -> dict[str, Any]:
    """The JSON object at ``url``, read whole within ``timeout`` and ``_MAX_DOCUMENT_BYTES``.

    urllib's timeout bounds each socket operation, not the exchange: a server sending a byte
    now and then, of its headers or of its body, would never time out, and would hold the
    thread reading it. So the whole exchange has a deadline of its own, which shuts the
    connection down under a read that is still waiting (_Deadline).
    """
    deadline = _Deadline(timeout)
    opener = urllib.request.build_opener(
        _DeadlineHTTPHandler(deadline), _DeadlineHTTPSHandler(deadline)
    )
    request = urllib.request.Request(url, headers={"User-Agent": "blackboard-mcp"})
    chunks: list[bytes] = []
    size = 0
    try:
        with deadline, opener.open(request, timeout=timeout) as response:
            # read1 returns what has arrived (chunked or not), so the checks run as it arrives.
            while chunk := response.read1(_READ_BYTES):
                size += len(chunk)
                if size > _MAX_DOCUMENT_BYTES:
                    raise ValueError(f"{what} document over {_MAX_DOCUMENT_BYTES} bytes")
                chunks.append(chunk)
    except (OSError, http.client.HTTPException) as exc:
        if deadline.passed:
            raise TimeoutError(f"{what} document not read within {timeout} s") from exc
        raise
    if deadline.passed:
        raise TimeoutError(f"{what} document not read within {timeout} s")
    document = json.loads(b"".join(chunks))
    if not isinstance(document, dict):
        raise ValueError(f"{what} is not a JSON object")
    return document


class _Deadline:
    """One fetch's deadline: when it passes, every connection the fetch opened is shut down,
    which ends a read blocked on it at once (closing the socket alone would not)."""

    def __init__(self, seconds: float) -> None:
        self.passed = False
        self._lock = threading.Lock()
        # The sockets, not the connections: urllib detaches a connection's socket once the
        # headers are in, and the body is then read from it through the response.
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._pass)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._timer.cancel()

    def connected(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            passed = self.passed
        if passed:
            _shut(sock)

    def _pass(self) -> None:
        with self._lock:
            self.passed = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _connection_class(
    base: type[http.client.HTTPConnection], deadline: _Deadline
) -> Callable[..., http.client.HTTPConnection]:
    """``base``, telling ``deadline`` of each connection once it is connected."""

    class Connection(base):  # type: ignore[valid-type, misc]  # a class chosen at run time
        def connect(self) -> None:
            super().connect()
            deadline.connected(self.sock)

    return Connection


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._class = _connection_class(http.client.HTTPConnection, deadline)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._class, req)


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(context=self._tls)
        self._class = _connection_class(http.client.HTTPSConnection, deadline)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._class, req, context=self._tls)
