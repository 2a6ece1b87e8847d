"""Log set-up for gateway processes: text for a terminal, one JSON object a line for a
log pipeline (``BB_LOG_FORMAT=json``). Records never carry bodies, arguments or tokens;
call records carry the request id, subject, tool, outcome and duration."""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

import orjson

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "color_message",  # uvicorn's ANSI-coloured copy of msg
    "message",
    "asctime",
}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure_logging(level: str, log_format: Literal["text", "json"]) -> None:
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # In stateless mode the SDK logs "Terminating session: None" at INFO for every request.
    logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)
