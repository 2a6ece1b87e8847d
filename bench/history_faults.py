"""Histories under faults: is every note's recorded history linearizable, fault by fault?

Clients (``--clients``, each an agent with its own token) write notes by compare-and-swap,
append to a log note and read, through two gateway processes (``testing.Workload``), while one
kind of fault is applied ``--repeats`` times; every call is recorded with its invocation and
completion times and outcome, and each note's history is checked for linearizability as a
versioned register with compare-and-swap and append (``testing.check_history``). A call
whose answer does not say what happened (timeout, cut connection, HTTP error, `unavailable`,
`unconfirmed`) is an unknown outcome: it may or may not have landed, and both are allowed.

The runs, each on a Redis of its own:

- ``redis-kill-always``, ``redis-kill-everysec``: the embedded Redis SIGKILLed and restarted
  on its data, under each appendfsync setting the board offers;
- ``gateway-kill``: one gateway SIGKILLed mid-write and started again (its clients move to
  the other, then back);
- ``proxy-cut``, ``proxy-refuse``, ``proxy-delay``: a loopback TCP proxy between the gateways
  and Redis (``testing.FaultProxy``) cuts every connection mid-stream, refuses new ones for a
  while, or holds every packet; during ``proxy-delay`` a quarter of the clients time out after
  ``--short-timeout`` seconds, shorter than the server's deadline, so calls land after their
  client gave up;
- ``cluster-failover-wait0``, ``cluster-failover-wait1``: a Redis Cluster (3 primaries, a
  replica each) whose primary holding the workspace is SIGKILLed and its replica promoted,
  with ``BB_WAIT_REPLICAS`` 0 and 1 (the gateways given one node's address, as an operator
  would).

Prints, per run: operations checked, unknown outcomes, notes whose history is not
linearizable (anomalies), and the first anomaly's explanation. Exits non-zero where the board
promises no anomaly and one was found (every run but ``cluster-failover-wait0``, where
replication is asynchronous: a write acknowledged by a primary that dies before its replica
has it is lost, by design; the run shows what that looks like).

    python bench/history_faults.py [--clients 16] [--repeats 3] [--ops-between 400]
        [--only RUN ...]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from blackboard_mcp.testing import (
    FaultProxy,
    GatewayProcess,
    LocalCluster,
    Workload,
    check_history,
)

sys.path.insert(0, str(Path(__file__).parent))
from _harness import bench_issuer, bench_token, embedded_redis, scratch, start_bench_gateway

RUNS = (
    "redis-kill-always",
    "redis-kill-everysec",
    "gateway-kill",
    "proxy-cut",
    "proxy-refuse",
    "proxy-delay",
    "cluster-failover-wait0",
    "cluster-failover-wait1",
)
# Where the board promises nothing: asynchronous replication across a failover.
NO_PROMISE = {"cluster-failover-wait0"}


@dataclass
class Row:
    run: str
    operations: int
    unknown: int
    notes: int
    anomalies: int
    first: str


Fault = Callable[[int], Awaitable[None]]


async def drive(
    run: str,
    redis_url: str,
    work: Path,
    args: argparse.Namespace,
    workspace: str,
    make_fault: Callable[[list[GatewayProcess], Workload], Fault],
    *,
    extra_env: dict[str, str] | None = None,
    short: bool = False,
) -> Row:
    env = extra_env or {}
    gateways = list(
        await asyncio.gather(
            *(
                asyncio.to_thread(start_bench_gateway, redis_url, work / f"gw{n}", extra_env=env)
                for n in range(2)
            )
        )
    )
    issuer = bench_issuer()
    workload = Workload(
        urls=[g.mcp_url for g in gateways],
        tokens=[
            bench_token(workspace=workspace, subject=f"agent-{n}", issuer=issuer)
            for n in range(args.clients)
        ],
        notes=[f"bb://{workspace}/plans/n{k}" for k in range(3)],
        log=f"bb://{workspace}/logs/run",
        call_timeout=10.0,
        short_timeout=args.short_timeout if short else None,
        short_clients=args.clients // 4 if short else 0,
    )
    try:
        await workload.prepare(gateways[0].mcp_url)
        running = asyncio.create_task(workload.run())
        fault = make_fault(gateways, workload)
        for k in range(args.repeats):
            await workload.reached((k + 1) * args.ops_between)
            await fault(k)
        await workload.reached((args.repeats + 1) * args.ops_between)
        workload.stop()
        await running
        live = next(g for g in gateways if g.process.poll() is None)
        await workload.final_reads(live.mcp_url)
    finally:
        for gateway in gateways:
            gateway.stop()
    verdicts = check_history(workload.operations)
    bad = [v for v in verdicts if not v.linearizable]
    return Row(
        run,
        operations=len(workload.operations),
        unknown=sum(op.outcome == "unknown" for op in workload.operations),
        notes=len(verdicts),
        anomalies=len(bad),
        first=bad[0].explain() if bad else "",
    )


async def redis_kill(mode: Literal["always", "everysec"], args: argparse.Namespace) -> Row:
    with (
        scratch("bench-history-") as work,
        embedded_redis(work / "redis", appendfsync=mode) as redis,
    ):

        def fault(_gateways: list[GatewayProcess], _w: Workload) -> Fault:
            async def kill(_k: int) -> None:
                await asyncio.to_thread(redis.kill)
                await asyncio.to_thread(redis.start)

            return kill

        return await drive(f"redis-kill-{mode}", redis.url, work, args, "hist", fault)


async def gateway_kill(args: argparse.Namespace) -> Row:
    with (
        scratch("bench-history-") as work,
        embedded_redis(work / "redis", appendfsync="always") as redis,
    ):

        def fault(gateways: list[GatewayProcess], workload: Workload) -> Fault:
            async def kill(k: int) -> None:
                victim = k % 2
                gateways[victim].kill()
                again = await asyncio.to_thread(
                    start_bench_gateway, redis.url, work / f"gw{victim}-{k}"
                )
                gateways[victim] = again
                workload.urls[victim] = again.mcp_url

            return kill

        return await drive("gateway-kill", redis.url, work, args, "hist", fault)


async def proxied(
    run: Literal["proxy-cut", "proxy-refuse", "proxy-delay"], args: argparse.Namespace
) -> Row:
    with (
        scratch("bench-history-") as work,
        embedded_redis(work / "redis", appendfsync="always") as redis,
    ):
        proxy = FaultProxy(redis.host, redis.port)
        url = redis.url.rsplit(":", 1)[0] + f":{await proxy.start()}/0"

        def fault(_gateways: list[GatewayProcess], workload: Workload) -> Fault:
            async def apply(k: int) -> None:
                if run == "proxy-cut":
                    proxy.cut()
                    return
                if run == "proxy-refuse":
                    proxy.refusing = True
                    proxy.cut()
                else:
                    proxy.delay = args.delay
                # Held for a share of the run's progress, then lifted.
                await workload.reached((k + 1) * args.ops_between + args.ops_between // 3)
                proxy.refusing = False
                proxy.delay = 0.0

            return apply

        try:
            return await drive(run, url, work, args, "hist", fault, short=run == "proxy-delay")
        finally:
            await proxy.close()


async def cluster_failover(wait: int, args: argparse.Namespace) -> Row:
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="bb-hist-"))).start()
    try:
        victim = cluster.nodes[1]
        workspace = next(
            w for w in (f"hist-{i}" for i in range(400)) if cluster.owner_of(f"{{{w}}}") is victim
        )

        def fault(_gateways: list[GatewayProcess], _w: Workload) -> Fault:
            async def kill(k: int) -> None:
                # Once: a cluster of three primaries with one replica each survives one loss
                # of the workspace's primary; the later repeats find it failed over already.
                if k == 0:
                    victim.kill()

            return kill

        with scratch("bb-hist-gw-") as work:
            return await drive(
                f"cluster-failover-wait{wait}",
                cluster.url,
                work,
                args,
                workspace,
                fault,
                extra_env={"BB_WAIT_REPLICAS": str(wait), "BB_REDIS_CLUSTER": "on"},
            )
    finally:
        cluster.wipe()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ops-between", type=int, default=400)
    parser.add_argument("--short-timeout", type=float, default=0.05)
    parser.add_argument("--delay", type=float, default=0.08)
    parser.add_argument("--only", nargs="*", choices=RUNS, default=list(RUNS))
    args = parser.parse_args()
    runs: dict[str, Callable[[], Awaitable[Row]]] = {
        "redis-kill-always": lambda: redis_kill("always", args),
        "redis-kill-everysec": lambda: redis_kill("everysec", args),
        "gateway-kill": lambda: gateway_kill(args),
        "proxy-cut": lambda: proxied("proxy-cut", args),
        "proxy-refuse": lambda: proxied("proxy-refuse", args),
        "proxy-delay": lambda: proxied("proxy-delay", args),
        "cluster-failover-wait0": lambda: cluster_failover(0, args),
        "cluster-failover-wait1": lambda: cluster_failover(1, args),
    }
    rows = [await runs[name]() for name in args.only]
    print(f"{'run':<24} {'operations':>10} {'unknown':>8} {'notes':>6} {'anomalies':>10}")
    for row in rows:
        print(
            f"{row.run:<24} {row.operations:>10} {row.unknown:>8} {row.notes:>6} "
            f"{row.anomalies:>10}"
        )
    for row in rows:
        if row.first:
            print(f"\n{row.run}: {row.first[:600]}")
    broken = [r.run for r in rows if r.anomalies and r.run not in NO_PROMISE]
    if broken:
        print(f"\nanomalies where the board promises none: {', '.join(broken)}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
