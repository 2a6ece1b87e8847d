"""`blackboard-mcp serve`: own the data dir and the port, run and watch the embedded Redis,
run the gateway, and stop all of it cleanly on a signal."""

from ._exits import ExitCode, ServeFailure
from ._run import Serving

__all__ = ["ExitCode", "ServeFailure", "Serving"]
