"""The environment of a server started by a benchmark or a test: its own stores, the shared model cache."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def isolated_env(tmp: Path) -> dict[str, str]:
    """Stores (and every other cache) under `tmp`; the dequantised model cache stays shared."""
    return {
        **os.environ,
        "SPD_LSP_MODEL_CACHE": os.environ.get("SPD_LSP_MODEL_CACHE") or platformdirs.user_cache_dir("spd-lsp"),
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "SPD_LSP_CACHE": str(tmp / "cache" / "spd-lsp"),
    }
