"""Real servers and raw requests to test and measure the board against.

The project's tests and benchmarks share these; running a board needs none of them. A
``LocalCluster`` is a Redis Cluster of the embedded ``redis-server`` (the ``embedded`` extra),
on loopback, with its faults (kill a node, wait for the failover).
"""

from ._cluster import HOST, ClusterNode, LocalCluster, cluster_ports, wait_for
from ._listen import LISTEN_VERSION, listen_request

__all__ = [
    "HOST",
    "LISTEN_VERSION",
    "ClusterNode",
    "LocalCluster",
    "cluster_ports",
    "listen_request",
    "wait_for",
]
