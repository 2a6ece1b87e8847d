"""A primary of the cluster dies: calls fail fast, its replica takes over, calls succeed again.

Its own cluster (this module kills one of its nodes), one replica per primary.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.client.subscriptions import ResourceUpdated, Subscription
from support import GatewayProcess, agent_token, call, mcp_client, start_gateway, stop_gateway

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.testing import LocalCluster, wait_for

pytestmark = pytest.mark.slow


async def next_uri(sub: Subscription, seconds: float = 10.0) -> str:
    with anyio.fail_after(seconds):
        event = await sub.__anext__()
    assert isinstance(event, ResourceUpdated)
    return event.uri


async def _hears(sub: Subscription, uri: str) -> bool:
    with anyio.move_on_after(20):
        while await next_uri(sub, 20) != uri:
            pass
        return True
    return False


@pytest.fixture(scope="module")
def doomed_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("doomed-cluster")).start()
    yield cluster
    cluster.wipe()


@pytest.fixture(scope="module")
def waiting_gateway(
    doomed_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    process = start_gateway(
        doomed_cluster.url,
        tmp_path_factory.mktemp("failover-gw"),
        extra_env={"BB_WAIT_REPLICAS": "1", "BB_WAIT_REPLICAS_TIMEOUT_MS": "2000"},
    )
    yield process
    stop_gateway(process)


async def test_a_killed_primary_fails_calls_fast_then_its_replica_serves_them_unrestarted(
    doomed_cluster: LocalCluster,
    waiting_gateway: GatewayProcess,
    issuer: TokenIssuer,
    tmp_path: Path,
) -> None:
    # A workspace on a primary other than the node the gateway was given.
    ws = next(
        f"fo-{i}"
        for i in range(100)
        if doomed_cluster.owner_of(f"{{fo-{i}}}").port != doomed_cluster.nodes[0].port
    )
    victim = doomed_cluster.owner_of(f"{{{ws}}}")
    token = agent_token(issuer, ws)
    async with (
        mcp_client(waiting_gateway.mcp_url, token) as client,
        mcp_client(waiting_gateway.mcp_url, token) as listener,
        listener.listen(resource_subscriptions=[f"bb://{ws}/t"]) as changes,
    ):
        for i in range(20):
            err, body = await call(
                client, "update_state", uri=f"bb://{ws}/t/n{i}", digest=f"kafka {i}", body="b"
            )
            assert not err, body  # acknowledged: its replica has it (BB_WAIT_REPLICAS=1)
        assert httpx.get(waiting_gateway.url + "/readyz").status_code == 200
        assert await next_uri(changes) == f"bb://{ws}/t/n0"

        victim.kill()
        started = time.perf_counter()
        err, body = await call(client, "get_state", uris=[f"bb://{ws}/t/n0"])
        assert err and body["error"]["code"] == "unavailable", body
        assert time.perf_counter() - started < 3.0
        assert httpx.get(waiting_gateway.url + "/readyz", timeout=10).status_code == 503
        metrics = httpx.get(waiting_gateway.url + "/metrics", timeout=10).text
        assert f'bb_redis_node_up{{node="127.0.0.1:{victim.port}",role="primary"}} 0.0' in metrics

        # The replica is promoted on its own (cluster-node-timeout 1 s); the same gateway,
        # never restarted, finds the new primary.
        deadline = time.monotonic() + 30
        while True:
            err, body = await call(client, "get_state", uris=[f"bb://{ws}/t/n0"])
            if not err or time.monotonic() > deadline:
                break
            assert body["error"]["code"] == "unavailable", body
            time.sleep(0.2)
        assert not err, body
        err, body = await call(client, "list_keys", topic="t", limit=50)
        assert not err and len(body["items"]) == 20, body
        err, body = await call(client, "search_keys", q="kafka", limit=50)
        assert not err and len(body["items"]) == 20, body
        # Its new primary has no replica left: a write is applied but not confirmed.
        err, body = await call(
            client, "update_state", uri=f"bb://{ws}/t/after", digest="after", body="x"
        )
        assert err and body["error"]["code"] == "unconfirmed", body
        err, body = await call(client, "get_state", uris=[f"bb://{ws}/t/after"])
        assert not err and body["items"][0]["version"] == 1, body
        # The listen stream opened before the failover hears of writes after it: its
        # gateway reads the change log on the promoted replica, from where it stopped.
        assert await _hears(changes, f"bb://{ws}/t/after")
    wait_for(
        lambda: httpx.get(waiting_gateway.url + "/readyz", timeout=10).status_code == 200,
        timeout=20,
        what="/readyz after the failover",
    )
