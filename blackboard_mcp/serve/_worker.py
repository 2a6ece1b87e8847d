"""The app factory uvicorn's worker processes call when `serve` runs with --workers > 1."""

from __future__ import annotations

import os

from starlette.applications import Starlette

from blackboard_mcp.store import set_parent_death_signal

# Not a BB_* setting: `serve` sets it for its own workers, nobody else should.
SERVE_PID_ENV = "BLACKBOARD_MCP_SERVE_PID"


def app_for_worker() -> Starlette:
    """The gateway, in a worker that ends (SIGTERM, a graceful stop) when `serve` dies.

    Without it a SIGKILLed `serve` left its workers holding the port, so the next start
    could not bind it. Workers are forked by uvicorn's supervisor on the main thread of
    `serve`, so the signal comes when `serve` itself goes.
    """
    serve_pid = int(os.environ.get(SERVE_PID_ENV) or 0)
    if serve_pid and serve_pid != os.getpid():
        set_parent_death_signal()
        if os.getppid() != serve_pid:
            # `serve` died before the line above: nobody would signal us now.
            os._exit(0)
    from blackboard_mcp.gateway import app_from_env

    return app_from_env()
