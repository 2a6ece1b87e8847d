"""The app factory uvicorn calls in each gateway process that `serve` runs.

`serve` hands it the settings it decided (the embedded Redis's URL, the signing key it
found or made, the host) as a ``functools.partial``: uvicorn pickles its config, this
factory included, into each worker process it spawns, so nothing travels through the
environment. Unpickling it imports this module and the settings only; the gateway package
(the MCP SDK, Starlette: seconds on a busy machine) is imported once the worker runs it, so
a worker is never killed as hung before it starts answering its supervisor.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

from blackboard_mcp.settings import Settings
from blackboard_mcp.store import set_parent_death_signal

if TYPE_CHECKING:
    from starlette.applications import Starlette

# prometheus_client's own switch: set, its metrics count into files in that directory. It
# is read when prometheus_client is first imported, so it is set before the gateway is.
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


def gateway_app(
    settings: Settings, *, serve_pid: int | None = None, metrics_dir: Path | None = None
) -> Starlette:
    """The gateway for ``settings``. In a worker process of `serve` (``serve_pid``), one that
    ends (SIGTERM, a graceful stop) when `serve` dies: without it a SIGKILLed `serve` left
    its workers holding the port, so the next start could not bind it."""
    if serve_pid is not None and serve_pid != os.getpid():
        set_parent_death_signal()
        if os.getppid() != serve_pid:
            # `serve` died before the line above: nobody would signal us now.
            os._exit(0)
    if metrics_dir is not None:
        os.environ[MULTIPROCESS_DIR_ENV] = str(metrics_dir)
    from blackboard_mcp._composition import gateway_parts
    from blackboard_mcp.gateway import configure_logging, create_app

    configure_logging(settings.log_level, settings.log_format)
    return create_app(gateway_parts(settings, metrics_dir=metrics_dir))


def app_factory(
    settings: Settings, *, serve_pid: int | None = None, metrics_dir: Path | None = None
) -> functools.partial[Starlette]:
    """``gateway_app`` bound to its arguments, for uvicorn's ``factory=True``; it pickles by
    reference to this module, so it reaches the worker processes uvicorn spawns."""
    return functools.partial(gateway_app, settings, serve_pid=serve_pid, metrics_dir=metrics_dir)
