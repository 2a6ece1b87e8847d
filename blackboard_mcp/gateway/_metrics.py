"""Prometheus metrics, one registry per app (no process-global collectors)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
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
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
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

    def render(self) -> bytes:
        return generate_latest(self.registry)
