"""Real servers and raw requests to test and measure the board against.

The project's tests and benchmarks share these; running a board needs none of them. A
``LocalCluster`` is a Redis Cluster of the embedded ``redis-server`` (the ``embedded`` extra),
on loopback, with its faults (kill a node, wait for the failover). A ``FaultProxy`` sits between
the gateways and Redis and cuts, delays or refuses; a ``Workload`` of agents records every call
as an ``Operation``, and ``check_history`` says whether each note's history is linearizable.
``start_gateway`` runs `blackboard-mcp serve` as a process (this checkout's package or another
revision's) for what only a real server shows: its workers, signals and logs.
"""

from ._cluster import HOST, ClusterNode, LocalCluster, cluster_ports, wait_for
from ._fault_proxy import FaultProxy
from ._gateway import (
    TEST_JWT_SECRET,
    GatewayDidNotStart,
    GatewayProcess,
    child_process,
    start_gateway,
    stop_gateway,
    wait_until_answering,
)
from ._history_workload import Workload
from ._linearizability import Operation, State, Verdict, check_history, check_note, step
from ._listen import LISTEN_VERSION, listen_request

__all__ = [
    "HOST",
    "LISTEN_VERSION",
    "TEST_JWT_SECRET",
    "ClusterNode",
    "FaultProxy",
    "GatewayDidNotStart",
    "GatewayProcess",
    "LocalCluster",
    "Operation",
    "State",
    "Verdict",
    "Workload",
    "check_history",
    "check_note",
    "child_process",
    "cluster_ports",
    "listen_request",
    "start_gateway",
    "step",
    "stop_gateway",
    "wait_for",
    "wait_until_answering",
]
