"""Prometheus metrics, one registry per app (no process-global collectors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from blackboard_mcp.store import NodeReport

_M = TypeVar("_M", bound="_CachedChildren")
# Distinct label sets a metric keeps at hand; past it, the cache starts again (still correct).
_MAX_CACHED = 1024


class _CachedChildren:
    """``labels()`` by one dict lookup for label sets seen before.

    prometheus_client's ``labels()`` checks and stringifies the values and takes a lock on
    every call; every tool call took three of them. Only for metrics whose children are
    never removed: a cached child would outlive its removal.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cached: dict[tuple[object, ...], Any] = {}

    def labels(self: _M, *labelvalues: object, **labelkwargs: object) -> _M:
        child = self._cached.get(labelvalues) if not labelkwargs else None
        if child is None:
            child = super().labels(*labelvalues, **labelkwargs)  # type: ignore[misc]
            if not labelkwargs:
                if len(self._cached) >= _MAX_CACHED:
                    self._cached.clear()
                self._cached[labelvalues] = child
        return child  # type: ignore[no-any-return]


class _Counter(_CachedChildren, Counter):
    pass


class _Histogram(_CachedChildren, Histogram):
    pass


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = _Counter(
            "bb_tool_calls",
            "Tool calls by tool and outcome (ok or an error code).",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.latency = _Histogram(
            "bb_tool_latency_seconds",
            "Tool call latency.",
            ["tool"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
        )
        self.conflicts = Counter(
            "bb_conflicts",
            "update_state calls refused by compare-and-swap.",
            registry=self.registry,
        )
        self.refused = _Counter(
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

        self.node_up = Gauge(
            "bb_redis_node_up",
            "1 when the Redis node answers, per node of the board (every node of a cluster).",
            ["node", "role"],
            registry=self.registry,
        )
        self.node_index_ready = Gauge(
            "bb_redis_node_index_ready",
            "1 when the primary's search index exists and has finished indexing.",
            ["node"],
            registry=self.registry,
        )
        self.node_memory = Gauge(
            "bb_redis_node_used_memory_bytes",
            "used_memory of each Redis node.",
            ["node", "role"],
            registry=self.registry,
        )

    def observe_nodes(self, nodes: Sequence[NodeReport]) -> None:
        """The nodes as seen at this scrape; a node gone from the topology leaves the series."""
        for gauge in (self.node_up, self.node_index_ready, self.node_memory):
            gauge.clear()
        for node in nodes:
            self.node_up.labels(node.address, node.role).set(1 if node.up else 0)
            self.node_memory.labels(node.address, node.role).set(node.used_memory_bytes)
            if node.role == "primary":
                self.node_index_ready.labels(node.address).set(1 if node.index == "ready" else 0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
