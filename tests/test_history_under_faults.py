"""No acknowledged write is lost, duplicated or reordered, and no read is torn, under faults:
a recorded history of 16 agents through two gateway processes, checked for linearizability
(``blackboard_mcp.testing.check_history``) while the run is cut, delayed, refused and killed.

The run's own Redis (appendfsync always, so a SIGKILL loses no acknowledged write) sits behind
a fault proxy (``blackboard_mcp.testing.FaultProxy``). Faults are placed by the run's progress,
each once: every connection to Redis cut mid-stream; Redis slowed while a quarter of the
clients give up after 50 ms (calls that may land after their client stopped waiting); new
connections refused; a gateway SIGKILLed mid-write (its clients move to the other); Redis
SIGKILLed and restarted on its data. The longer runs, each fault several times and under each
appendfsync setting, are bench/history_faults.py.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from support import agent_token, start_gateway, stop_gateway

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.store import EmbeddedRedis
from blackboard_mcp.testing import FaultProxy, Workload, check_history

CLIENTS = 16
WORKSPACE = "history"


async def test_every_note_history_stays_linearizable_through_faults(
    tmp_path: Path, issuer: TokenIssuer
) -> None:
    redis = EmbeddedRedis(data_dir=tmp_path / "redis", appendfsync="always").start()
    proxy = FaultProxy(redis.host, redis.port)
    through_proxy = redis.url.rsplit(":", 1)[0] + f":{await proxy.start()}/0"
    env = {"BB_RATE_LIMIT_PER_MINUTE": "0", "BB_LOG_LEVEL": "WARNING"}
    gateways = await asyncio.gather(
        *(
            asyncio.to_thread(start_gateway, through_proxy, tmp_path / f"gw{n}", extra_env=env)
            for n in range(2)
        )
    )
    try:
        workload = Workload(
            urls=[g.mcp_url for g in gateways],
            tokens=[agent_token(issuer, WORKSPACE, sub=f"agent-{n}") for n in range(CLIENTS)],
            notes=[f"bb://{WORKSPACE}/plans/n{k}" for k in range(3)],
            log=f"bb://{WORKSPACE}/logs/run",
            call_timeout=10.0,
            short_timeout=0.05,
            short_clients=CLIENTS // 4,
        )
        await workload.prepare(gateways[0].mcp_url)
        running = asyncio.create_task(workload.run())
        await workload.reached(300)
        proxy.cut()
        await workload.reached(600)
        proxy.delay = 0.08
        await workload.reached(800)
        proxy.delay = 0.0
        proxy.refusing = True
        proxy.cut()
        await workload.reached(900)
        proxy.refusing = False
        await workload.reached(1200)
        gateways[1].process.kill()
        await workload.reached(1500)
        await asyncio.to_thread(redis.kill)
        await asyncio.to_thread(redis.start)
        await workload.reached(1900)
        workload.stop()
        await running
        await workload.final_reads(gateways[0].mcp_url)
    finally:
        for gateway in gateways:
            stop_gateway(gateway)
        await proxy.close()
        redis.stop()
        shutil.rmtree(tmp_path / "redis", ignore_errors=True)

    verdicts = check_history(workload.operations)
    assert [v.explain() for v in verdicts if not v.linearizable] == []
    assert len(verdicts) == 4 and len(workload.operations) >= 1900
    # Each fault did what it is there for: calls whose outcome the clients could not know.
    unknown = sum(v.unknown for v in verdicts)
    assert unknown > 0 and workload.transport_errors["timeout"] > 0, workload.transport_errors
    assert workload.transport_errors["connection"] > 0, workload.transport_errors
    assert workload.transport_errors["unavailable"] > 0, workload.transport_errors
    assert proxy.cuts >= 2
    # Writes landed through it all: every note moved on, the log grew.
    finals = [op for op in workload.operations if op.client == "final"]
    assert all(op.version is not None and op.version > 10 for op in finals), finals
