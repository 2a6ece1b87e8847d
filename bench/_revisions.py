"""This checkout and other git revisions, one gateway at a time, for benches that compare
what each answers (not how fast: each gets a Redis of its own, started and stopped in turn)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from _gateway_process import start_gateway
from cas_load import extract_revision

from blackboard_mcp.store import EmbeddedRedis

THIS_CHECKOUT = "this checkout"


def each_revision(against: Sequence[str], work: Path) -> Iterator[tuple[str, str]]:
    """(label, MCP URL) for this checkout, then for each revision of ``against``: a gateway
    on an embedded Redis of its own, both stopped before the next starts."""
    revisions: list[tuple[str, Path | None]] = [(THIS_CHECKOUT, None)]
    for rev in against:
        tree = work / f"tree-{rev}"
        tree.mkdir()
        extract_revision(rev, tree)
        revisions.append((rev, tree))
    for n, (label, tree) in enumerate(revisions):
        redis = EmbeddedRedis(data_dir=work / f"redis-{n}")
        redis.start()
        try:
            proc, port = start_gateway(redis.url, data_dir=work / f"gw-{n}", package_root=tree)
            try:
                yield label, f"http://127.0.0.1:{port}/mcp"
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        finally:
            redis.stop()
