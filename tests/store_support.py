"""Small helpers shared by the store tests: a raw Redis view of what a call left behind."""

from __future__ import annotations

import redis

WS = "ws"


def uri(path: str, *, ws: str = WS, topic: str = "t") -> str:
    return f"bb://{ws}/{topic}/{path}"


def raw(url: str) -> redis.Redis:
    """A plain synchronous client, to look at keys the Board API does not show."""
    return redis.Redis.from_url(url)


def snapshot(url: str) -> dict[bytes, bytes]:
    """Every key with its serialised value: two equal snapshots mean nothing was written."""
    client = raw(url)
    try:
        return {key: client.dump(key) or b"" for key in sorted(client.scan_iter(count=1000))}
    finally:
        client.close()


def dbsize(url: str) -> int:
    client = raw(url)
    try:
        return int(client.dbsize())
    finally:
        client.close()
