"""A small labelled board for search_keys: notes as a fleet working on an outage would write
them, and queries as agents type them, each with the notes a person judged relevant.

Used by bench/search_ranking.py (precision at 5, side by side with other revisions) and by
tests/test_search_ranking.py (which holds the figure). Relevance was judged by reading each
note against the query's intent, not by running any search.
"""

from __future__ import annotations

from dataclasses import dataclass

# topic/key -> (digest, body)
NOTES: dict[str, tuple[str, str]] = {
    "incidents/db2-replica-lag": (
        "Replica lag on db-2 reached 40 s during the nightly batch.",
        "The WAL sender on the primary fell behind while the batch wrote 30 GB. Replica lag "
        "peaked at 40 seconds and recovered after the checkpoint finished.",
    ),
    "incidents/db3-disk-full": (
        "db-3 stopped replaying: disk full.",
        "The WAL archive filled the volume on db-3; replica lag grew until the archive was "
        "pruned by hand. Disk alerts fired 20 minutes late.",
    ),
    "incidents/db4-lag-network": (
        "Lag on replica db-4 from a saturated network link.",
        "Replication traffic shared a 1 Gb link with backups; the replica fell 12 s behind. "
        "WAL shipping resumed once the backup window closed.",
    ),
    "incidents/api-latency-4-2": (
        "API p99 latency tripled after deploy 4.2.",
        "Connection pool exhaustion in the orders service after the 4.2 deploy; p99 went "
        "from 180 ms to 560 ms. Rolled back at 14:10.",
    ),
    "incidents/cache-stampede": (
        "Cache stampede on the catalog after a cold restart.",
        "All catalog keys expired together; the database took 9x its usual read load for "
        "four minutes. Latency rose on every page.",
    ),
    "incidents/queue-backlog": (
        "Email queue backlog of 2 million messages.",
        "A stuck consumer held the partition lock. The backlog drained in 40 minutes after "
        "a restart.",
    ),
    "incidents/tls-expiry": (
        "TLS certificate expired on the status page.",
        "The renewal job had been disabled since the migration. Renewed by hand.",
    ),
    "plans/wal-retention": (
        "Plan: keep two days of WAL instead of seven.",
        "Shorter WAL retention frees 400 GB per primary. Risk: a replica more than two days "
        "behind cannot catch up from the archive and must be rebuilt.",
    ),
    "plans/replica-lag-alerts": (
        "Alert on replica lag over 10 s for 2 minutes.",
        "Today lag alerts page at 60 s, which is too late for read-after-write users. New "
        "rule: warn at 10 s sustained for 2 minutes, page at 30 s.",
    ),
    "plans/rollback-4-2": (
        "Rollback plan for release 4.2.",
        "Roll back the orders service first, then the gateway. Database migrations of 4.2 "
        "are backward compatible, so no schema rollback is needed.",
    ),
    "plans/cache-warmup": (
        "Warm the catalog cache before routing traffic.",
        "A warm-up job loads the 50,000 hottest keys with jittered expiry so that a restart "
        "does not cause a stampede.",
    ),
    "plans/disk-capacity": (
        "Disk capacity plan for the database fleet.",
        "Grow the data volumes by 30% and move the WAL archive to object storage. Disk usage "
        "alerts at 80% instead of 95%.",
    ),
    "plans/deploy-freeze": (
        "Deploy freeze during the holiday peak.",
        "No deploys from 20 December to 3 January except security fixes, approved by two "
        "reviewers.",
    ),
    "research/sync-vs-async-replication": (
        "Synchronous vs asynchronous replication trade-offs.",
        "Synchronous replication removes lag on the synchronous standby at the cost of "
        "commit latency; asynchronous replication keeps commits fast but a replica may lag.",
    ),
    "research/wal-compression": (
        "WAL compression cuts replication traffic by 60%.",
        "Measured on db-2: wal_compression=on reduced WAL volume from 30 GB to 12 GB per "
        "night, with 4% more CPU on the primary.",
    ),
    "research/lag-measurement": (
        "How to measure replica lag correctly.",
        "Compare replay LSN with the primary's current LSN, not timestamps: an idle primary "
        "makes timestamp-based replica lag look huge.",
    ),
    "research/pool-sizing": (
        "Connection pool sizing for the orders service.",
        "Pool of 20 per instance saturates at 1,200 requests per second; latency climbs "
        "sharply past that point.",
    ),
    "research/stampede-prevention": (
        "Techniques to prevent cache stampedes.",
        "Jittered expiry, request coalescing and early recomputation each stop a stampede; "
        "coalescing is the cheapest to add.",
    ),
    "research/report-q3": (
        "Quarterly reliability report, Q3.",
        "Four incidents, two of them database related. Mean time to recovery 38 minutes.",
    ),
    "research/repository-layout": (
        "Repository layout of the deploy tooling.",
        "Scripts live under tools/deploy; the rollout manifests under deploy/manifests.",
    ),
    "data/replica-lag-by-host": (
        "Replica lag per host, last 24 hours.",
        "host\tmax_lag_s\twal_mb\ndb-2\t40\t30500\ndb-3\t310\t28000\ndb-4\t12\t9000",
    ),
    "data/disk-usage": (
        "Disk usage per database host.",
        "host\tdisk_used_pct\ndb-2\t71\ndb-3\t100\ndb-4\t64",
    ),
    "data/latency-by-endpoint": (
        "p99 latency per endpoint after deploy 4.2.",
        "endpoint\tp99_ms\n/orders\t560\n/catalog\t210\n/search\t140",
    ),
    "data/queue-depths": (
        "Queue depth per consumer group.",
        "group\tdepth\nemail\t2000000\nwebhooks\t1200",
    ),
    "reviews/postmortem-db3": (
        "Postmortem: db-3 disk full and replica lag.",
        "Root cause: WAL archive growth with no alert before 95%. Actions: alert at 80%, move "
        "the archive off the data volume, shorten WAL retention.",
    ),
    "reviews/postmortem-4-2": (
        "Postmortem: latency regression in release 4.2.",
        "The pool size was halved by a configuration refactor. Actions: a latency check in "
        "the deploy pipeline and a rollback drill.",
    ),
    "reviews/lag-dashboard-feedback": (
        "Feedback on the lag dashboard.",
        "Operators want replica lag and WAL generation rate on one chart.",
    ),
    "reviews/replica-lag-wording": (
        "Wording of the lag page.",
        "The page says 'the replica is lagging' where it should say 'replica lag above threshold'.",
    ),
}


@dataclass(frozen=True)
class Labelled:
    q: str
    relevant: frozenset[str]


def _r(*names: str) -> frozenset[str]:
    return frozenset(names)


QUERIES: tuple[Labelled, ...] = (
    # The notes about replica lag caused by WAL: every word matters.
    Labelled(
        "replica lag WAL",
        _r(
            "incidents/db2-replica-lag",
            "incidents/db3-disk-full",
            "incidents/db4-lag-network",
            "data/replica-lag-by-host",
            "reviews/postmortem-db3",
            "reviews/lag-dashboard-feedback",
        ),
    ),
    # Lag that had nothing to do with disks.
    Labelled(
        "lag -disk",
        _r(
            "incidents/db2-replica-lag",
            "incidents/db4-lag-network",
            "plans/replica-lag-alerts",
            "research/lag-measurement",
            "data/replica-lag-by-host",
            "research/sync-vs-async-replication",
            "reviews/lag-dashboard-feedback",
            "reviews/replica-lag-wording",
        ),
    ),
    # Anything on replicas and replication.
    Labelled(
        "replica* lag",
        _r(
            "incidents/db2-replica-lag",
            "incidents/db3-disk-full",
            "incidents/db4-lag-network",
            "plans/replica-lag-alerts",
            "research/sync-vs-async-replication",
            "research/lag-measurement",
            "data/replica-lag-by-host",
            "reviews/postmortem-db3",
            "reviews/lag-dashboard-feedback",
            "reviews/replica-lag-wording",
        ),
    ),
    # The exact phrase.
    Labelled(
        '"replica lag"',
        _r(
            "incidents/db2-replica-lag",
            "incidents/db3-disk-full",
            "plans/replica-lag-alerts",
            "research/lag-measurement",
            "data/replica-lag-by-host",
            "reviews/postmortem-db3",
            "reviews/lag-dashboard-feedback",
            "reviews/replica-lag-wording",
        ),
    ),
    Labelled(
        "rollback deploy 4.2",
        _r(
            "plans/rollback-4-2",
            "incidents/api-latency-4-2",
            "reviews/postmortem-4-2",
            "data/latency-by-endpoint",
        ),
    ),
    Labelled(
        "cache stampede prevention",
        _r("research/stampede-prevention", "plans/cache-warmup", "incidents/cache-stampede"),
    ),
    Labelled(
        "disk full alert",
        _r(
            "incidents/db3-disk-full",
            "reviews/postmortem-db3",
            "plans/disk-capacity",
            "data/disk-usage",
        ),
    ),
    Labelled(
        "latency pool",
        _r(
            "incidents/api-latency-4-2",
            "research/pool-sizing",
            "reviews/postmortem-4-2",
        ),
    ),
    Labelled(
        "WAL retention archive",
        _r(
            "plans/wal-retention",
            "reviews/postmortem-db3",
            "incidents/db3-disk-full",
            "plans/disk-capacity",
        ),
    ),
    Labelled(
        "queue backlog consumer",
        _r("incidents/queue-backlog", "data/queue-depths"),
    ),
)

CUTOFF = 5


def precision_at_5(ranked: list[str], relevant: frozenset[str]) -> float:
    """The share of the first five hits that are relevant, out of at most five: a query with
    three relevant notes is perfect when the first three hits are those three."""
    wanted = min(CUTOFF, len(relevant))
    return sum(1 for name in ranked[:wanted] if name in relevant) / wanted
