"""Moving a slot of the test cluster (``blackboard_mcp.testing.LocalCluster``) as a reshard does."""

from __future__ import annotations

from blackboard_mcp.testing import HOST, ClusterNode, LocalCluster, wait_for


def migrate_slot(cluster: LocalCluster, slot: int, target: ClusterNode) -> int:
    """Move ``slot`` and its keys to ``target`` as redis-cli's reshard does; returns the count.

    IMPORTING on the target, MIGRATING on the source, MIGRATE the keys in batches, then
    SETSLOT NODE on every primary so that the whole cluster agrees at once.
    """
    source = next(n for n in cluster.primary_nodes() if _serves(n, slot))
    source_id, target_id = source.node_id(), target.node_id()
    target.command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    moved = 0
    while True:
        batch = source.command("CLUSTER", "GETKEYSINSLOT", slot, 100)
        assert isinstance(batch, list)
        if not batch:
            break
        source.command("MIGRATE", HOST, target.port, "", 0, 5000, "KEYS", *batch)
        moved += len(batch)
    for node in cluster.primary_nodes():
        node.command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    cluster.wait_until_ok()
    wait_for(
        lambda: all(cluster.owner_seen_by(n, slot) == target.port for n in cluster.live()),
        timeout=15,
        what=f"every node to see slot {slot} on {target.port}",
    )
    return moved


def _serves(node: ClusterNode, slot: int) -> bool:
    # CLUSTER SLOTS is the cluster's view; the node's own answer is what MIGRATE needs.
    for start, end, owner, *_ in node.command("CLUSTER", "SLOTS"):  # type: ignore[union-attr]
        if start <= slot <= end:
            return int(owner[1]) == node.port
    return False
