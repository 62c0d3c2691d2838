"""Logging for journald: one event per line on stderr, as text or JSON, secrets redacted.

Redaction is the last line of defence, not the first: no code path logs the cluster secret,
and the handler still replaces any occurrence of a configured secret in the formatted line
(a request echoed in an exception message, a library's debug output) with `********`.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

MASK = "********"
TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
# Attributes every LogRecord has; anything else was passed with `extra=` and is reported.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, extra fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in event:
                event[key] = value
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        return json.dumps(event, default=str)


class OneLineFormatter(logging.Formatter):
    """Text with tracebacks folded onto the event's line, so journald keeps one entry per event."""

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\n", " | ")


class RedactingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    def __init__(self, secrets: Iterable[str | None]):
        super().__init__(sys.stderr)
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        for secret in self.secrets:
            line = line.replace(secret, MASK)
        return line


def configure(level: str, log_format: str, secrets: Iterable[str | None] = ()) -> None:
    """Replace the root logger's handlers with one redacting stderr handler."""
    handler = RedactingHandler(secrets)
    handler.setFormatter(JsonFormatter() if log_format == "json" else OneLineFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)  # library warnings become events in the same format
    # The ovs library's poller imports eventlet (os-ken brings it) only to detect monkey-patching;
    # contivd never runs eventlet, so its deprecation notice is noise in every start log.
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated", module=r"ovs\.poller")
