"""A board on a ``rediss://`` URL: both kinds of the store's Redis connections (redis-py's and
its own, store/connection/_wire.py) speak TLS, checking the server's certificate.

The embedded Redis is built without TLS, so a TLS-terminating proxy in front of it plays a
managed Redis that only takes TLS: a connection that did not speak TLS would fail there.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from store_support import write_read_list_and_search

from blackboard_mcp.store import (
    Board,
    EmbeddedRedis,
    ListKeys,
    Unavailable,
    UpdateState,
    board_client,
    free_port,
)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test redis")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "redis.crt", directory / "redis.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class TlsProxy:
    """Accepts TLS on a port of its own and relays the plain bytes to a Redis."""

    def __init__(self, target_port: int, cert: Path, key: Path) -> None:
        self.port = free_port()
        self.connections = 0
        self._target_port = target_port
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(cert, key)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TlsProxy:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._relay, "127.0.0.1", self.port, ssl=self._context)
        )
        self._ready.set()
        self._loop.run_forever()
        server.close()
        for task in asyncio.all_tasks(self._loop):
            task.cancel()
        self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        upstream_reader, upstream_writer = await asyncio.open_connection(
            "127.0.0.1", self._target_port
        )

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, ssl.SSLError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


@pytest.fixture
def tls_url(redis_url: str, redis_server: EmbeddedRedis, tmp_path: Path) -> Iterator[str]:
    cert, key = self_signed(tmp_path)
    with TlsProxy(redis_server.port, cert, key) as proxy:
        password = urlsplit(redis_url).password
        yield f"rediss://:{password}@127.0.0.1:{proxy.port}/0?ssl_ca_certs={cert}"


async def test_a_board_on_a_tls_url_writes_reads_and_searches_through_tls(tls_url: str) -> None:
    await write_read_list_and_search(tls_url)


async def test_a_server_certificate_the_client_does_not_trust_is_refused(
    tls_url: str, tmp_path: Path
) -> None:
    # The CA file names another certificate: both kinds of connection must refuse the server.
    (tmp_path / "other").mkdir()
    other, _ = self_signed(tmp_path / "other")
    board = Board(client=board_client(tls_url.split("?")[0] + f"?ssl_ca_certs={other}"))
    try:
        with pytest.raises(Unavailable):
            await board.update_state(
                UpdateState.parse({"uri": "bb://w/t/a", "digest": "never", "body": ""}), author="me"
            )
        with pytest.raises(Unavailable):
            await board.list_keys(ListKeys.parse({"topic": "t"}), workspace="w")
    finally:
        await board.close()
