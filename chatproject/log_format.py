"""One JSON object per log line (``LOG_FORMAT=json``), for log shippers and ``jq``.

Standard library logging with a formatter of its own: the fields are the record's time (UTC,
ISO 8601 with milliseconds), level, logger, message, the process and the conversation ids
bound when the line was written (``chatproject.log_context``), and the traceback, if any. orjson
writes it (already a dependency, and any value it cannot encode is written as its ``str``).
"""

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

from chatproject.log_context import FIELDS


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": getattr(record, "tether_process", str(record.process)),
        }
        ids: dict[str, str] = getattr(record, "tether_ids", {})
        for name in FIELDS:
            if name in ids:
                line[name] = ids[name]
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()
