"""Prometheus metrics, one registry per app (no process-global collectors).

The call metrics are prometheus_client's own. With several worker processes (``serve
--workers N``) each worker counts into prometheus_client's multiprocess files in one
directory (``PROMETHEUS_MULTIPROC_DIR``, which ``serve`` makes for its workers), and a scrape,
whichever worker answers it, adds every worker's counts up: counters never go backwards
between scrapes, so Prometheus sees no resets. The Redis node gauges are what the scraping
worker saw of Redis at that scrape, read once per scrape.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from blackboard_mcp.store import NodeReport

# prometheus_client's own variable: set, its metrics count into files in that directory.
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"

# Multiprocess mode has no `_created` series; one worker shows none either, so that the
# exposition does not change with the number of workers.
disable_created_metrics()  # type: ignore[no-untyped-call]


class _NodeGauges(Collector):
    """The board's Redis nodes as the last scrape saw them; a node gone leaves the series."""

    def __init__(self) -> None:
        self._nodes: Sequence[NodeReport] = ()

    def observe(self, nodes: Sequence[NodeReport]) -> None:
        self._nodes = tuple(nodes)

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "bb_redis_node_up",
            "1 when the Redis node answers, per node of the board (every node of a cluster).",
            labels=["node", "role"],
        )
        ready = GaugeMetricFamily(
            "bb_redis_node_index_ready",
            "1 when the primary's search index exists and has finished indexing.",
            labels=["node"],
        )
        memory = GaugeMetricFamily(
            "bb_redis_node_used_memory_bytes",
            "used_memory of each Redis node.",
            labels=["node", "role"],
        )
        for node in self._nodes:
            up.add_metric([node.address, node.role], 1 if node.up else 0)
            memory.add_metric([node.address, node.role], node.used_memory_bytes)
            if node.role == "primary":
                ready.add_metric([node.address], 1 if node.index == "ready" else 0)
        yield from (up, ready, memory)


class GatewayMetrics:
    """The gateway's metrics; ``multiprocess_dir`` when this is one of several workers."""

    def __init__(self, *, multiprocess_dir: Path | None = None) -> None:
        self.registry = CollectorRegistry()
        self._multiprocess_dir = multiprocess_dir
        self.calls = Counter(
            "bb_tool_calls",
            "Tool calls by tool and outcome (ok or an error code).",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "bb_tool_latency_seconds",
            "Tool call latency.",
            ["tool"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=self.registry,
        )
        self.conflicts = Counter(
            "bb_conflicts",
            "update_state calls refused by compare-and-swap.",
            registry=self.registry,
        )
        self.refused = Counter(
            "bb_refused_calls",
            "Calls refused before the handler (auth, scope, rate).",
            ["code"],
            registry=self.registry,
        )
        self.direct_calls = Counter(
            "bb_direct_tool_calls",
            "Tool calls answered without the SDK's per-request machinery (the rest of "
            "bb_tool_calls went through the SDK).",
            registry=self.registry,
        )
        self.direct_listens = Counter(
            "bb_direct_listens",
            "subscriptions/listen streams written without the SDK's per-notification machinery.",
            registry=self.registry,
        )
        self.listeners_dropped = Counter(
            "bb_listeners_dropped",
            "Change streams (subscriptions/listen, the board page's feed) ended because "
            "their client fell more than BB_LISTENER_QUEUE changes behind.",
            registry=self.registry,
        )
        self._nodes = _NodeGauges()
        self._node_registry = CollectorRegistry()
        self._node_registry.register(self._nodes)

    def observe_nodes(self, nodes: Sequence[NodeReport]) -> None:
        """The nodes as seen at this scrape."""
        self._nodes.observe(nodes)

    def render(self) -> bytes:
        if self._multiprocess_dir is None:
            calls = generate_latest(self.registry)
        else:
            # Every worker's files, this one's included; the registry above then only says
            # which metrics exist (its own values are this worker's alone).
            merged = CollectorRegistry()
            MultiProcessCollector(merged, path=str(self._multiprocess_dir))  # type: ignore[no-untyped-call]
            calls = generate_latest(merged)
        return calls + generate_latest(self._node_registry)
