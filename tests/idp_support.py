"""A small identity provider for the tests: RSA and EC signing keys, its JWKS and its
RFC 8414 metadata served over real HTTP from a thread, and a count of the JWKS fetches."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


@dataclass
class SigningKey:
    kid: str
    algorithm: str
    private: Any
    published: bool = True

    def jwk(self) -> dict[str, Any]:
        family = RSAAlgorithm if self.algorithm.startswith("RS") else ECAlgorithm
        data: dict[str, Any] = json.loads(family.to_jwk(self.private.public_key()))
        data.update(kid=self.kid, use="sig")
        return data

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


@dataclass
class FakeIdP:
    """Serves /jwks and /.well-known/oauth-authorization-server; counts JWKS fetches."""

    keys: dict[str, SigningKey] = field(default_factory=dict)
    jwks_fetches: int = 0
    server: ThreadingHTTPServer | None = None
    # An issuer with a path (Keycloak's /realms/NAME) publishes OpenID Connect metadata
    # under it; one without, RFC 8414 metadata at the root.
    issuer_path: str = ""
    # What the metadata says the issuer is, when it should lie.
    announced_issuer: str | None = None
    extra_jwks: list[dict[str, Any]] = field(default_factory=list)
    # Serve /jwks as a body that never ends: (bytes a chunk, seconds between chunks).
    endless_jwks: tuple[int, float] | None = None
    jwks_bytes_sent: int = 0
    # Set when the client hung up on an endless JWKS (it stopped reading).
    jwks_hung_up: threading.Event = field(default_factory=threading.Event)
    # An endless JWKS still ends when the IdP stops, or after this long, so that a client
    # that never hangs up (the defect the tests look for) is not left reading it for ever.
    stopping: threading.Event = field(default_factory=threading.Event)
    endless_for_seconds: float = 20.0
    # Paths answered a byte of the status line at a time (never idle long enough for a read
    # timeout), until the client hangs up, the IdP stops, or endless_for_seconds.
    trickled_paths: set[str] = field(default_factory=set)

    @property
    def origin(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def issuer(self) -> str:
        return self.origin + self.issuer_path

    def add_rsa(self, kid: str, *, published: bool = True) -> SigningKey:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        key = SigningKey(kid, "RS256", private, published)
        self.keys[kid] = key
        return key

    def add_ec(self, kid: str) -> SigningKey:
        key = SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))
        self.keys[kid] = key
        return key

    def jwks(self) -> dict[str, Any]:
        return {"keys": [*self.extra_jwks, *(k.jwk() for k in self.keys.values() if k.published)]}

    def token(
        self,
        *,
        kid: str,
        scope: str,
        audience: str | list[str],
        sub: str = "agent-ext",
        issuer: str | None = None,
        ttl: int = 300,
        **extra: Any,
    ) -> str:
        key = self.keys[kid]
        now = int(time.time())
        claims = {
            "iss": issuer or self.issuer,
            "aud": audience,
            "sub": sub,
            "scope": scope,
            "iat": now,
            "exp": now + ttl,
            "jti": uuid.uuid4().hex,
            **extra,
        }
        return jwt.encode(claims, key.private, algorithm=key.algorithm, headers={"kid": kid})

    def hs256_with_public_key(self, *, kid: str, scope: str, audience: str) -> str:
        """The algorithm-confusion forgery: HMAC-signed with the published public key."""
        now = int(time.time())
        header = {"alg": "HS256", "typ": "JWT", "kid": kid}
        claims = {
            "iss": self.issuer,
            "aud": audience,
            "sub": "forger",
            "scope": scope,
            "iat": now,
            "exp": now + 300,
            "jti": uuid.uuid4().hex,
        }
        signing_input = f"{_b64(header)}.{_b64(claims)}".encode()
        secret = self.keys[kid].public_pem()
        signature = hmac.new(secret, signing_input, hashlib.sha256).digest()
        return (
            signing_input.decode() + "." + base64.urlsafe_b64encode(signature).decode().rstrip("=")
        )

    def metadata_path(self) -> str:
        if self.issuer_path:
            return self.issuer_path + "/.well-known/openid-configuration"
        return "/.well-known/oauth-authorization-server"

    def start(self) -> None:
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path in idp.trickled_paths:
                    self._trickle()
                    return
                if self.path == "/jwks" and idp.endless_jwks is not None:
                    idp.jwks_fetches += 1
                    self._send_endless(*idp.endless_jwks)
                    return
                if self.path == "/jwks":
                    idp.jwks_fetches += 1
                    body = idp.jwks()
                elif self.path == idp.metadata_path():
                    body = {
                        "issuer": idp.announced_issuer or idp.issuer,
                        "jwks_uri": idp.origin + "/jwks",
                        "authorization_endpoint": idp.issuer + "/authorize",
                        "token_endpoint": idp.issuer + "/token",
                        "response_types_supported": ["code"],
                    }
                else:
                    self.send_error(404)
                    return
                payload = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _trickle(self) -> None:
                until = time.monotonic() + idp.endless_for_seconds
                try:
                    while not idp.stopping.is_set() and time.monotonic() < until:
                        self.wfile.write(b"H")
                        self.wfile.flush()
                        time.sleep(0.1)
                except OSError:
                    pass
                self.close_connection = True

            def _send_endless(self, size: int, pause: float) -> None:
                # A JSON object that never closes, chunk after chunk, until the client goes.
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                chunk = b'{"keys": [' + b" " * max(size - 10, 0)
                until = time.monotonic() + idp.endless_for_seconds
                try:
                    while not idp.stopping.is_set() and time.monotonic() < until:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                        idp.jwks_bytes_sent += len(chunk)
                        chunk = b" " * size
                        time.sleep(pause)
                except OSError:
                    idp.jwks_hung_up.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.stopping.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _b64(part: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")


@contextmanager
def serving_idp(
    *, rsa: str = "rsa-1", ec: str | None = "ec-1", issuer_path: str = ""
) -> Iterator[FakeIdP]:
    """A started IdP with an RSA key and (unless ``ec`` is None) an EC key, stopped after."""
    provider = FakeIdP(issuer_path=issuer_path)
    provider.add_rsa(rsa)
    if ec is not None:
        provider.add_ec(ec)
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()
