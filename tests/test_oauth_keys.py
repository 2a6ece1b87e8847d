"""An external issuer's keys: found through its metadata or named directly, cached, kept when
the IdP is down, and never a symmetric or encryption key (a real IdP over HTTP)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from idp_support import FakeIdP, serving_idp

from blackboard_mcp.auth import KeySource, KeysUnavailable, UnknownKey
from blackboard_mcp.store import free_port


@pytest.fixture
def idp() -> Iterator[FakeIdP]:
    with serving_idp() as provider:
        yield provider


@pytest.fixture
def realm_idp() -> Iterator[FakeIdP]:
    """Keycloak's shape: the issuer has a path, its metadata is OpenID Connect's under it."""
    with serving_idp(ec=None, issuer_path="/realms/fleet") as provider:
        yield provider


async def test_keys_named_by_url_are_fetched_once_and_cached(idp: FakeIdP) -> None:
    source = KeySource(jwks_url=idp.origin + "/jwks", refetch_seconds=60)
    assert (await source.key("rsa-1")).key_type == "RSA"
    assert (await source.key("ec-1")).key_type == "EC"
    assert idp.jwks_fetches == 1


class ManualClock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_an_unknown_key_id_refetches_at_a_bounded_rate_and_finds_a_rotated_key(
    idp: FakeIdP,
) -> None:
    clock = ManualClock()
    source = KeySource(jwks_url=idp.origin + "/jwks", refetch_seconds=30, clock=clock)
    assert (await source.key("rsa-1")).key_type == "RSA"
    assert idp.jwks_fetches == 1
    idp.add_rsa("rsa-new", published=False)
    # Within the interval a made-up kid fetches nothing: a flood of forged kids costs the
    # IdP no more than one fetch per interval.
    clock.now += 29
    for _ in range(5):
        with pytest.raises(UnknownKey):
            await source.key("rsa-new")
    assert idp.jwks_fetches == 1
    # Past it, one unknown kid fetches once; more inside the new interval do not.
    clock.now += 2
    with pytest.raises(UnknownKey):
        await source.key("rsa-new")
    assert idp.jwks_fetches == 2
    with pytest.raises(UnknownKey):
        await source.key("rsa-new")
    assert idp.jwks_fetches == 2
    # A key the IdP rotated in is found by the next refetch, and then served from the cache.
    idp.keys["rsa-new"].published = True
    clock.now += 31
    assert (await source.key("rsa-new")).key_type == "RSA"
    assert (await source.key("rsa-new")).key_type == "RSA"
    assert idp.jwks_fetches == 3


async def test_keys_are_found_through_rfc8414_or_openid_metadata(
    idp: FakeIdP, realm_idp: FakeIdP
) -> None:
    for provider in (idp, realm_idp):
        source = KeySource(issuer=provider.issuer)
        assert (await source.key("rsa-1")).key_id == "rsa-1"
        assert provider.jwks_fetches == 1


async def test_a_metadata_address_that_trickles_is_given_up_at_the_timeout_for_the_next(
    realm_idp: FakeIdP,
) -> None:
    # RFC 8414's address trickles; OpenID Connect's, tried after it, answers. Cut at each
    # document's own deadline, the search goes on well within the whole fetch's bound.
    realm_idp.trickled_paths.add("/.well-known/oauth-authorization-server/realms/fleet")
    source = KeySource(issuer=realm_idp.issuer, timeout_seconds=1)
    assert (await source.key("rsa-1")).key_id == "rsa-1"
    assert realm_idp.jwks_fetches == 1


async def test_metadata_naming_another_issuer_is_not_trusted(realm_idp: FakeIdP) -> None:
    realm_idp.announced_issuer = "https://evil.test/realms/fleet"
    source = KeySource(issuer=realm_idp.issuer)
    with pytest.raises(KeysUnavailable):
        await source.key("rsa-1")
    assert realm_idp.jwks_fetches == 0


async def test_symmetric_and_encryption_keys_are_never_used(idp: FakeIdP) -> None:
    idp.extra_jwks = [
        {"kty": "oct", "kid": "shared", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQ"},
        {**idp.keys["rsa-1"].jwk(), "kid": "enc-1", "use": "enc"},
    ]
    source = KeySource(jwks_url=idp.origin + "/jwks", refetch_seconds=60)
    for kid in ("shared", "enc-1"):
        with pytest.raises(UnknownKey):
            await source.key(kid)
    assert (await source.key("rsa-1")).key_id == "rsa-1"


async def test_keys_held_stay_in_use_while_the_idp_is_down(idp: FakeIdP) -> None:
    source = KeySource(
        jwks_url=idp.origin + "/jwks", cache_seconds=0.01, refetch_seconds=0, timeout_seconds=1
    )
    assert (await source.key("rsa-1")).key_id == "rsa-1"
    idp.stop()
    # The cache has expired and every fetch fails: the key already held still verifies.
    assert (await source.key("rsa-1")).key_id == "rsa-1"


async def test_an_idp_never_reached_is_unavailable_not_unknown() -> None:
    source = KeySource(jwks_url=f"http://127.0.0.1:{free_port()}/jwks", timeout_seconds=1)
    with pytest.raises(KeysUnavailable):
        await source.key("rsa-1")


async def test_a_hanging_idp_neither_hangs_the_call_nor_blocks_the_event_loop() -> None:
    # Accepts connections and never answers.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        port = listener.getsockname()[1]
        source = KeySource(jwks_url=f"http://127.0.0.1:{port}/jwks", timeout_seconds=0.5)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        running = asyncio.create_task(ticker())
        started = time.monotonic()
        with pytest.raises(KeysUnavailable):
            await source.key("rsa-1")
        waited = time.monotonic() - started
        running.cancel()
        assert 0.4 < waited < 3, waited
        # The loop kept turning while the fetch waited.
        assert ticks >= waited / 0.01 / 3, (ticks, waited)
    finally:
        listener.close()


async def test_a_jwks_over_the_size_cap_is_refused(idp: FakeIdP) -> None:
    # A real key, then a padding entry that takes the document past 256 KB.
    idp.extra_jwks = [{"kty": "oct", "kid": "padding", "k": "A" * 300_000}]
    source = KeySource(jwks_url=idp.origin + "/jwks", timeout_seconds=2)
    with pytest.raises(KeysUnavailable):
        await source.key("rsa-1")


async def test_an_endless_jwks_is_hung_up_on_after_the_size_cap(idp: FakeIdP) -> None:
    idp.endless_jwks = (64 * 1024, 0.0)
    source = KeySource(jwks_url=idp.origin + "/jwks", timeout_seconds=2)
    with pytest.raises(KeysUnavailable):
        await source.key("rsa-1")
    # The fetch stopped reading and closed the connection: it is not still reading (and
    # holding) the body in the background.
    assert await asyncio.to_thread(idp.jwks_hung_up.wait, 10)
    # Sent: the cap, plus what the two ends' socket buffers held when it hung up.
    assert idp.jwks_bytes_sent < 32 * 1024 * 1024, idp.jwks_bytes_sent


async def test_a_jwks_sent_a_trickle_at_a_time_is_given_up_on_after_the_timeout(
    idp: FakeIdP,
) -> None:
    # Never idle long enough for a socket timeout, never near the size cap.
    idp.endless_jwks = (16, 0.05)
    source = KeySource(jwks_url=idp.origin + "/jwks", timeout_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(KeysUnavailable):
        await source.key("rsa-1")
    assert await asyncio.to_thread(idp.jwks_hung_up.wait, 5)
    assert time.monotonic() - started < 4


async def test_a_token_signed_with_a_key_the_idp_withdrew_stops_working_after_its_cache_time(
    idp: FakeIdP,
) -> None:
    # Verdicts are remembered per token; the key behind a remembered external token is
    # looked up again on each call, and the key set is refetched once it is older than its
    # cache time: a compromised key the IdP withdraws stops working within that time, not at
    # the token's expiry.
    from blackboard_mcp.auth import ExternalTokens, NoRevocations, TokenVerifier, load_signing_keys

    clock = ManualClock()
    source = KeySource(
        jwks_url=idp.origin + "/jwks", cache_seconds=300, refetch_seconds=30, clock=clock
    )
    resource = "https://board.example/mcp/"
    external = ExternalTokens(
        sources={idp.issuer: source}, audiences=[resource], leeway=0, max_ttl_seconds=3600
    )
    _, own_keys = load_signing_keys(secret="s" * 48)
    verifier = TokenVerifier(
        keys=own_keys,
        issuer="blackboard-mcp",
        audience="blackboard-mcp",
        leeway=0,
        revocations=NoRevocations(),
        external=external,
    )
    idp.add_rsa("rsa-leaked")
    token = idp.token(
        kid="rsa-leaked", scope="openid bb:ws:w bb:read:*", audience=resource, ttl=3000
    )
    assert (await verifier.check(token)).workspace == "w"
    assert idp.jwks_fetches == 1
    idp.keys["rsa-leaked"].published = False  # the IdP withdraws the key
    clock.now += 299
    assert (await verifier.check(token)).workspace == "w"  # within the cache time: held
    clock.now += 2
    with pytest.raises(UnknownKey):
        await verifier.check(token)
    assert idp.jwks_fetches == 2
    with pytest.raises(UnknownKey):  # not remembered any more either
        await verifier.check(token)


async def test_a_jwks_whose_headers_trickle_in_is_cut_at_the_timeout() -> None:
    # A byte of the status line now and then: no socket read ever times out, so only a
    # deadline for the whole exchange (headers included) ends the fetch and its connection.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    hung_up = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            try:
                for _ in range(200):  # bounded: 40 s at most
                    conn.sendall(b"H")
                    time.sleep(0.2)
            except OSError:
                hung_up.set()

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    try:
        source = KeySource(jwks_url=f"http://127.0.0.1:{port}/jwks", timeout_seconds=0.5)
        started = time.monotonic()
        with pytest.raises(KeysUnavailable):
            await source.key("rsa-1")
        # The fetch gave up at its own deadline, and its connection was closed.
        assert await asyncio.to_thread(hung_up.wait, 10)
        assert time.monotonic() - started < 10  # generous: a loaded machine is slow to wake
    finally:
        listener.close()
