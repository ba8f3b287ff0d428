"""The one logging set-up of every long-running command (`spd-lsp`, `spd-lsp engine`, its Ray form)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def configure_logging(log_file: str | None, level: str) -> None:
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)  # an editor's log folder may not exist yet
    handler = logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # pygls logs every message body at INFO; keep that for DEBUG runs only.
    logging.getLogger("pygls").setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)
