"""A real Redis Cluster from the project's own wheels: primaries, replicas, and faults.

Each node is the embedded ``redis-server`` with the standalone RediSearch and RedisJSON
modules, cluster-enabled, on loopback. Slots are split evenly with ``CLUSTER ADDSLOTSRANGE``
and the nodes joined with ``CLUSTER MEET``; everything is polled, nothing slept for a fixed
time. The cluster bus listens on port + 10000, so ports are taken below 55536 with their bus
port free too.
"""

from __future__ import annotations

import contextlib
import functools
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from blackboard_mcp.store import find_binaries, set_parent_death_signal

HOST = "127.0.0.1"
SLOTS = 16384
BUS_OFFSET = 10000


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def cluster_ports(count: int) -> list[int]:
    """``count`` ports below 55536 whose cluster bus ports (+10000) are free as well."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randrange(20000, 45000)
        if port in chosen or port + BUS_OFFSET in chosen:
            continue
        if _port_free(port) and _port_free(port + BUS_OFFSET):
            chosen.append(port)
    return chosen


def wait_for(check: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.RedisError, OSError):
            if check():
                return
        time.sleep(0.02)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


@dataclass
class ClusterNode:
    port: int
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def client(self, timeout: float = 2.0) -> redis.Redis[bytes]:
        return redis.Redis(host=HOST, port=self.port, socket_timeout=timeout)

    def command(self, *args: str | int) -> Any:
        client = self.client()
        try:
            return client.execute_command(*args)
        finally:
            client.close()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, node_timeout_ms: int, *, cluster_enabled: bool = True) -> None:
        binaries = find_binaries()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "redis.conf"
        config.write_text(
            "\n".join(
                [
                    f"bind {HOST}",
                    f"port {self.port}",
                    f'dir "{self.data_dir}"',
                    f"cluster-enabled {'yes' if cluster_enabled else 'no'}",
                    "cluster-config-file nodes.conf",
                    f"cluster-node-timeout {node_timeout_ms}",
                    # A replica may be promoted however long it was cut off: the tests kill
                    # primaries on purpose and want the failover, not a stuck shard.
                    "cluster-replica-validity-factor 0",
                    "appendonly no",
                    'save ""',
                    "loglevel warning",
                    'logfile "redis.log"',
                    f'loadmodule "{binaries.search_module}"',
                    f'loadmodule "{binaries.json_module}"',
                ]
            )
            + "\n"
        )
        self.process = subprocess.Popen(
            [str(binaries.server), str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=set_parent_death_signal,
        )

    def kill(self) -> None:
        """Die at once, as a crashed machine would: no shutdown, no goodbye to the cluster."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def node_id(self) -> str:
        value = self.command("CLUSTER", "MYID")
        return value.decode() if isinstance(value, bytes) else str(value)

    def info(self, section: str) -> dict[str, str]:
        raw = self.command("INFO", section)
        assert isinstance(raw, dict)
        return {str(k): str(v) for k, v in raw.items()}

    def cluster_info(self) -> dict[str, str]:
        raw = self.command("CLUSTER", "INFO")
        assert isinstance(raw, bytes | str)
        text = raw.decode() if isinstance(raw, bytes) else raw
        return dict(line.split(":", 1) for line in text.split() if ":" in line)

    def role(self) -> str:
        return self.info("replication")["role"]

    def answers(self) -> bool:
        """Up, with its search module loaded."""
        return self.command("FT._LIST") is not None

    def knows(self, total: int) -> bool:
        """It has met ``total`` nodes, itself included."""
        return int(self.cluster_info().get("cluster_known_nodes", "0")) == total

    def in_sync(self) -> bool:
        """A replica whose link to its primary is up."""
        return self.info("replication").get("master_link_status") == "up"


@dataclass
class LocalCluster:
    """``primaries`` primaries with ``replicas`` replicas each, on loopback."""

    root: Path
    primaries: int = 3
    replicas: int = 1
    node_timeout_ms: int = 1000
    nodes: list[ClusterNode] = field(default_factory=list)

    @property
    def url(self) -> str:
        """One node's URL: the gateway is given a single node, as an operator would give it."""
        return self.nodes[0].url

    def start(self) -> LocalCluster:
        ports = cluster_ports(self.primaries * (1 + self.replicas))
        self.nodes = [ClusterNode(port, self.root / str(port)) for port in ports]
        for node in self.nodes:
            node.start(self.node_timeout_ms)
        for node in self.nodes:
            wait_for(node.answers, timeout=10, what=f"node {node.port}")
        primaries = self.nodes[: self.primaries]
        share = SLOTS // self.primaries
        for i, node in enumerate(primaries):
            last = SLOTS - 1 if i == self.primaries - 1 else (i + 1) * share - 1
            node.command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            first.command("CLUSTER", "MEET", HOST, node.port)
        total = len(self.nodes)
        for node in self.nodes:
            wait_for(
                functools.partial(node.knows, total),
                timeout=15,
                what="every node to know every other",
            )
        ids = [node.node_id() for node in primaries]
        for r, node in enumerate(self.nodes[self.primaries :]):
            node.command("CLUSTER", "REPLICATE", ids[r % self.primaries])
        self.wait_until_ok()
        for node in self.nodes[self.primaries :]:
            wait_for(node.in_sync, timeout=15, what=f"replica {node.port} in sync")
        return self

    def live(self) -> list[ClusterNode]:
        return [node for node in self.nodes if node.alive]

    def wait_until_ok(self, timeout: float = 20) -> None:
        """Every live node says cluster_state:ok and agrees on who serves all the slots."""

        def ok() -> bool:
            return all(
                n.cluster_info().get("cluster_state") == "ok"
                and n.cluster_info().get("cluster_slots_ok") == str(SLOTS)
                for n in self.live()
            )

        wait_for(ok, timeout=timeout, what="cluster_state:ok on every node")

    def primary_nodes(self) -> list[ClusterNode]:
        return [node for node in self.live() if node.role() == "master"]

    def owner_seen_by(self, node: ClusterNode, slot: int) -> int | None:
        """The port of the primary that ``node`` says serves ``slot``."""
        for start, end, owner, *_ in node.command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return int(owner[1])
        return None

    def owner_of(self, key: str) -> ClusterNode:
        slot = self.slot_of(key)
        port = self.owner_seen_by(self.live()[0], slot)
        for node in self.live():
            if node.port == port:
                return node
        raise LookupError(f"no node serves slot {slot}")

    def slot_of(self, key: str) -> int:
        value = self.nodes[0].command("CLUSTER", "KEYSLOT", key) if self.nodes[0].alive else None
        if value is None:
            value = self.live()[0].command("CLUSTER", "KEYSLOT", key)
        return int(value)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def wipe(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
