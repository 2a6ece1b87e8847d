"""Prometheus metrics, one registry per app (no process-global collectors)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from math import inf
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

from blackboard_mcp.store import NodeReport

_Child = TypeVar("_Child")


class _CountChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class _Labelled(Generic[_Child]):
    """A metric's children by label values, made on first use.

    prometheus_client's metrics take a lock on every ``inc``/``observe`` (and ``labels()``
    checks and stringifies its values): every tool call paid for three or four. The gateway
    counts on its event loop's one thread, the only one that renders ``/metrics`` too, so
    plain numbers are enough; the exposition is prometheus_client's own, from ``collect``.
    Only for label values from a closed set (tool names, error codes): children are kept.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        make_child: Callable[[], _Child],
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._make_child = make_child
        self._children: dict[tuple[str, ...], _Child] = {}

    def labels(self, *values: str) -> _Child:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self._labelnames):
                raise ValueError(f"{self._name} takes labels {self._labelnames}")
            key = tuple(str(v) for v in values)
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self._make_child()
        return child


class _Counter(_Labelled[_CountChild]):
    """A counter, with labels or without (then ``inc`` on the metric itself)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, documentation, labelnames, _CountChild)
        self._unlabelled = _CountChild()

    def inc(self, amount: float = 1.0) -> None:
        self._unlabelled.value += amount

    def collect(self) -> Iterator[CounterMetricFamily]:
        if not self._labelnames:
            yield CounterMetricFamily(self._name, self._documentation, self._unlabelled.value)
            return
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in self._children.items():
            family.add_metric(values, child.value)
        yield family


class _HistogramChild:
    __slots__ = ("_bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, the last one +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        # Bucket ``le`` counts values <= its bound: the first bound not below the value.
        self.counts[bisect_left(self._bounds, value)] += 1
        self.total += value


class _Histogram(_Labelled[_HistogramChild]):
    """A histogram with labels."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> None:
        self._bounds = bounds = tuple(sorted(buckets))
        super().__init__(name, documentation, labelnames, lambda: _HistogramChild(bounds))

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in self._children.items():
            cumulative = list(accumulate(child.counts))
            buckets = [
                (_bound_label(bound), float(count))
                for bound, count in zip((*self._bounds, inf), cumulative, strict=True)
            ]
            family.add_metric(list(values), buckets, child.total)
        yield family


def _bound_label(bound: float) -> str:
    # As prometheus_client writes a bucket's ``le`` (its bounds here are all short decimals).
    return "+Inf" if bound == inf else repr(float(bound))


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = _Counter(
            "bb_tool_calls",
            "Tool calls by tool and outcome (ok or an error code).",
            ["tool", "outcome"],
        )
        self.latency = _Histogram(
            "bb_tool_latency_seconds",
            "Tool call latency.",
            ["tool"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
        )
        self.conflicts = _Counter("bb_conflicts", "update_state calls refused by compare-and-swap.")
        self.refused = _Counter(
            "bb_refused_calls",
            "Calls refused before the handler (auth, scope, rate).",
            ["code"],
        )
        self.direct_calls = _Counter(
            "bb_direct_tool_calls",
            "Tool calls answered without the SDK's per-request machinery (the rest of "
            "bb_tool_calls went through the SDK).",
        )
        for metric in (self.calls, self.latency, self.conflicts, self.refused, self.direct_calls):
            self.registry.register(metric)

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
