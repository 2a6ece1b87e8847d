"""Real servers and raw requests to test and measure the board against.

The project's tests and benchmarks share these; running a board needs none of them. A
``LocalCluster`` is a Redis Cluster of the embedded ``redis-server`` (the ``embedded`` extra),
on loopback, with its faults (kill a node, wait for the failover). A ``FaultProxy`` sits between
the gateways and Redis and cuts, delays or refuses; a ``Workload`` of agents records every call
as an ``Operation``, and ``check_history`` says whether each note's history is linearizable.
"""

from ._cluster import HOST, ClusterNode, LocalCluster, cluster_ports, wait_for
from ._fault_proxy import FaultProxy
from ._history_workload import Workload
from ._linearizability import Operation, State, Verdict, check_history, check_note, step
from ._listen import LISTEN_VERSION, listen_request

__all__ = [
    "HOST",
    "LISTEN_VERSION",
    "ClusterNode",
    "FaultProxy",
    "LocalCluster",
    "Operation",
    "State",
    "Verdict",
    "Workload",
    "check_history",
    "check_note",
    "cluster_ports",
    "listen_request",
    "step",
    "wait_for",
]
