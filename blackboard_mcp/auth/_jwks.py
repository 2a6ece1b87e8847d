"""An external issuer's signing keys: fetched, cached, bounded.

The keys are fetched on the event loop, with the async HTTP client the MCP SDK brings: every
document (metadata and JWKS) is read with a size cap and a deadline for the whole exchange
(connecting, headers and body), so a slow or dead identity provider makes calls fail with
``unavailable``, never hangs them, and whoever answers for the IdP cannot hold a connection
or grow the process's memory with an endless or trickled body. At the deadline the fetch is
cancelled, which closes its connection.

A token naming a key id that is not in the cached set makes the set be fetched again (the
IdP may have rotated its keys), at most once per ``refetch_seconds``, so a stream of tokens
with made-up key ids cannot turn the gateway into a load generator against the IdP.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
from jwt import PyJWK, PyJWTError
from jwt.exceptions import MissingCryptographyError

from ._errors import KeysUnavailable, UnknownKey

log = logging.getLogger(__name__)

# Signature algorithms an external token may use, by key type. Never HMAC: a JWKS publishes
# public keys, and a token "signed" with one as an HMAC secret must not pass.
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
ASYMMETRIC = frozenset([*_RSA, "ES256", "ES384", "ES512", "ES256K", "EdDSA"])
# Metadata and JWKS documents: a real one is a few KB (a JWKS of 20 RSA-4096 keys is 20 KB).
_MAX_DOCUMENT_BYTES = 256 * 1024
# Raw bytes, never decoded: a compressed body could expand past the cap in one step.
_HEADERS = {"User-Agent": "blackboard-mcp", "Accept-Encoding": "identity"}


class IssuerKey(PyJWK):
    """A key an external issuer publishes, with the algorithms it may verify: its own
    ``alg`` when the JWK names one."""

    def __init__(self, jwk: dict[str, Any]) -> None:
        super().__init__(jwk)
        named = jwk.get("alg")
        if named is not None:
            algorithms: tuple[str, ...] = (str(named),) if str(named) in ASYMMETRIC else ()
        elif self.key_type == "RSA":
            algorithms = _RSA
        else:
            algorithms = (self.algorithm_name,) if self.algorithm_name in ASYMMETRIC else ()
        self.algorithms = algorithms


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
        self._keys: dict[str | None, IssuerKey] = {}
        self._fetched_at = -math.inf
        self._attempted_at = -math.inf
        self._lock: asyncio.Lock | None = None

    async def key(self, kid: str | None) -> IssuerKey:
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

    def _lookup(self, kid: str | None) -> IssuerKey | None:
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
            # Each document has its own deadline; the whole refresh (metadata and JWKS) is
            # bounded too, so a call waiting for keys waits about twice the timeout at most.
            async with asyncio.timeout(2 * self._timeout + 1):
                keys = await self._fetch()
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

    async def _fetch(self) -> dict[str | None, IssuerKey]:
        # One client per refresh (a refresh is rare): its connections close with it. The
        # system's trust store, as the operator configured it, verifies the IdP.
        async with httpx2.AsyncClient(
            headers=_HEADERS,
            verify=ssl.create_default_context(),
            timeout=self._timeout,
            follow_redirects=True,
        ) as http:
            if self._jwks_url is None:
                assert self._issuer is not None
                self._jwks_url = await self._discover(http, self._issuer)
            # Not PyJWKClient: it reads the whole body, with no cap on its size or its time.
            document = await _get_json(http, self._jwks_url, self._timeout, "JWKS")
        keys: dict[str | None, IssuerKey] = {}
        for key in _usable_keys(document):
            # Keys for encryption, and anything that is not a public signature key, are
            # not ours to verify with.
            if key.public_key_use not in (None, "sig") or not key.algorithms:
                continue
            keys[key.key_id] = key
        if not keys:
            raise KeysUnavailable("the key set holds no public signature keys")
        return keys

    async def _discover(self, http: httpx2.AsyncClient, issuer: str) -> str:
        for url in metadata_urls(issuer):
            try:
                document = await _get_json(http, url, self._timeout, "metadata")
            except (httpx2.HTTPError, OSError, ValueError):
                continue
            # RFC 8414 section 3.3: the document must be the issuer's own.
            if document.get("issuer") != issuer:
                log.warning("metadata at %s names another issuer; ignored", url)
                continue
            jwks_uri = document.get("jwks_uri")
            if isinstance(jwks_uri, str) and urlsplit(jwks_uri).scheme in ("https", "http"):
                return jwks_uri
        raise KeysUnavailable(f"no metadata with a jwks_uri found for issuer {issuer}")


def _usable_keys(document: dict[str, Any]) -> list[IssuerKey]:
    """The JWKS's keys this library can load; others (unknown types, curves) are skipped."""
    entries = document.get("keys")
    if not isinstance(entries, list) or not entries:
        raise ValueError("the JWKS holds no keys")
    keys: list[IssuerKey] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        try:
            keys.append(IssuerKey(entry))
        except MissingCryptographyError:
            raise
        except PyJWTError:
            continue
    return keys


async def _get_json(
    http: httpx2.AsyncClient, url: str, timeout: float, what: str
) -> dict[str, Any]:
    """The JSON object at ``url``, read whole within ``timeout`` and ``_MAX_DOCUMENT_BYTES``.

    The client's own timeout bounds each read, not the exchange: a server sending a byte now
    and then, of its headers or of its body, would never time out. So the whole exchange has
    a deadline of its own, whose cancellation closes the connection.
    """
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout), http.stream("GET", url) as response:
            response.raise_for_status()
            async for chunk in response.aiter_raw():
                size += len(chunk)
                if size > _MAX_DOCUMENT_BYTES:
                    raise ValueError(f"{what} document over {_MAX_DOCUMENT_BYTES} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise TimeoutError(f"{what} document not read within {timeout:g} s") from None
    document = json.loads(b"".join(chunks))
    if not isinstance(document, dict):
        raise ValueError(f"{what} is not a JSON object")
    return document
