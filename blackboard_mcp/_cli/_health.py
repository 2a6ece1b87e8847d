"""A gateway's probes over plain HTTP, with the standard library.

`blackboard-mcp health` runs where operators are (a container, a bastion), where only the
package's own dependencies are installed; httpx is a test dependency.
"""

from __future__ import annotations

import urllib.error
import urllib.request

PROBES = ("/healthz", "/readyz")
_TIMEOUT_SECONDS = 5.0


def _status(url: str) -> tuple[str, bool]:
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_SECONDS) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:  # a 503 is an answer, not a failure to connect
        status = exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return f"unreachable ({reason})", False
    return str(status), status == 200


def probe_gateway(base_url: str) -> list[tuple[str, str, bool]]:
    """(probe path, what it answered, healthy) for each of the gateway's probes."""
    base = base_url.rstrip("/")
    return [(path, *_status(base + path)) for path in PROBES]
