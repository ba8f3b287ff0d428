"""The one logging set-up of every long-running command (`spd-lsp`, `spd-lsp engine`, its Ray form)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LogFile(logging.FileHandler):
    """A log file that a full disk (or any failed write) cannot turn into a traceback on stderr per record, as
    `logging` prints by default: the first failure is said once, in one line, and the log goes on to stderr."""

    def __init__(self, path: str) -> None:
        super().__init__(path, encoding="utf-8")
        self.fallback: logging.Handler | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.fallback is not None:
            self.fallback.emit(record)
        else:
            super().emit(record)

    def close(self) -> None:
        try:
            super().close()
        except OSError:  # what it still held could not be written either (said at the first failure)
            self.stream = None

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        if self.fallback is not None:
            return
        problem = sys.exc_info()[1]
        sys.stderr.write(f"spd-lsp: cannot write the log file {self.baseFilename} ({problem}); "
                         "the log goes to stderr from here on\n")
        self.fallback = logging.StreamHandler(sys.stderr)
        self.fallback.setFormatter(self.formatter)
        self.fallback.emit(record)


def log_handler(log_file: str | None) -> logging.Handler:
    """`log_file` (its folder made), or stderr: where it cannot be opened, said in one line."""
    if log_file:
        try:
            Path(log_file).parent.mkdir(parents=True, exist_ok=True)  # an editor's log folder may not exist yet
            return LogFile(log_file)
        except OSError as exc:
            sys.stderr.write(f"spd-lsp: cannot open the log file {log_file} ({exc}); logging to stderr\n")
    return logging.StreamHandler(sys.stderr)


def configure_logging(log_file: str | None, level: str) -> None:
    handler = log_handler(log_file)
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # pygls logs every message body at INFO; keep that for DEBUG runs only.
    logging.getLogger("pygls").setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)
