"""Signing and verification keys: an HS256 shared secret, or Ed25519 keys with a ``kid``."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ._errors import UnknownKey

HS_KID = "hs"


@dataclass(frozen=True)
class SigningKey:
    algorithm: str  # "HS256" or "EdDSA"
    kid: str
    key: Any = field(repr=False)


@dataclass(frozen=True)
class VerificationKeys:
    """Every key a gateway accepts, by kid. One algorithm per kid: no HS/RS confusion."""

    keys: dict[str, tuple[str, Any]] = field(repr=False)

    def for_kid(self, kid: str | None) -> tuple[str, Any]:
        if kid is None and len(self.keys) == 1:
            return next(iter(self.keys.values()))
        if kid is None or kid not in self.keys:
            raise UnknownKey(f"the token's key id {kid!r} is not one this board accepts")
        return self.keys[kid]


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def generate_hs_secret_file(path: Path) -> None:
    """A fresh 384-bit shared secret, readable by its owner only."""
    _write_private(path, secrets.token_urlsafe(48).encode())


def generate_ed25519_keypair(directory: Path, kid: str) -> tuple[Path, Path]:
    """``<kid>.key`` (private, 0600) and ``<kid>.pem`` (public) in ``directory``."""
    private = Ed25519PrivateKey.generate()
    private_path = directory / f"{kid}.key"
    public_path = directory / f"{kid}.pem"
    _write_private(
        private_path,
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    public_path.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private_path, public_path


def load_signing_keys(
    *,
    secret: str | None = None,
    secret_file: Path | None = None,
    private_key_file: Path | None = None,
    public_keys_dir: Path | None = None,
) -> tuple[SigningKey | None, VerificationKeys]:
    """Ed25519 keys when a private key file or a directory of public keys is given, else the
    shared secret (its file wins over ``secret``); the key to sign with, if any, and every key
    to verify with."""
    if public_keys_dir or private_key_file:
        signing = None
        if private_key_file:
            private = serialization.load_pem_private_key(
                private_key_file.read_bytes(), password=None
            )
            signing = SigningKey("EdDSA", private_key_file.stem, private)
        keys: dict[str, tuple[str, Any]] = {}
        if public_keys_dir:
            for pem in sorted(public_keys_dir.glob("*.pem")):
                keys[pem.stem] = ("EdDSA", serialization.load_pem_public_key(pem.read_bytes()))
        if signing is not None and signing.kid not in keys:
            keys[signing.kid] = ("EdDSA", signing.key.public_key())
        return signing, VerificationKeys(keys)
    if secret_file:
        secret = secret_file.read_text().strip()
    if not secret:
        return None, VerificationKeys({})
    return SigningKey("HS256", HS_KID, secret), VerificationKeys({HS_KID: ("HS256", secret)})
