"""One board on a Redis Cluster: a gateway given any one node serves every tool call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_support import LocalCluster
from support import GatewayProcess, agent_token, call, mcp_client, start_gateway, stop_gateway

from blackboard_mcp.auth import TokenIssuer


@pytest.fixture(scope="module")
def cluster_gateway(
    redis_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    # Given the last node, a replica: any node of the cluster will do.
    process = start_gateway(redis_cluster.nodes[-1].url, tmp_path_factory.mktemp("cluster-gw"))
    yield process
    stop_gateway(process)


async def test_a_gateway_given_one_node_writes_reads_links_and_searches_across_the_cluster(
    cluster_gateway: GatewayProcess, redis_cluster: LocalCluster, issuer: TokenIssuer
) -> None:
    # Enough workspaces that every primary owns some of them.
    workspaces = [f"cl-{i}" for i in range(12)]
    assert len({redis_cluster.owner_of(f"{{{ws}}}").port for ws in workspaces}) == 3
    for ws in workspaces:
        async with mcp_client(cluster_gateway.mcp_url, agent_token(issuer, ws)) as client:
            err, body = await call(
                client,
                "update_state",
                uri=f"bb://{ws}/plan/a",
                digest=f"Kafka rollout plan of {ws}",
                body="consumer lag",
                expect_version=0,
            )
            assert not err, body
            err, body = await call(
                client, "update_state", uri=f"bb://{ws}/plan/b", digest="Another", body="x"
            )
            assert not err, body
            err, body = await call(
                client, "link_state", src=f"bb://{ws}/plan/b", rel="depends_on",
                dst=[f"bb://{ws}/plan/a"],
            )
            assert not err, body
            err, body = await call(client, "get_state", uris=[f"bb://{ws}/plan/a"], mode="full")
            assert not err, body
            assert body["items"][0]["body"] == "consumer lag"
            err, body = await call(client, "list_keys", topic="plan")
            assert not err, body
            assert {i["uri"] for i in body["items"]} == {f"bb://{ws}/plan/a", f"bb://{ws}/plan/b"}
            err, body = await call(client, "search_keys", q="kafka")
            assert not err, body
            # Only this workspace's note, though every workspace has one that matches.
            assert [i["uri"] for i in body["items"]] == [f"bb://{ws}/plan/a"]
