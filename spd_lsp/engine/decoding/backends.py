"""Where a model's forward runs: the backend hung on a loaded model (`engine/fast` attaches its `FastBackend`),
found by every `ModelRunner` of that model. Here, below both, so decoding never imports the fast path."""

from __future__ import annotations

from typing import Any

ATTRIBUTE = "_spd_fast_backend"


def attached(model: Any) -> Any:
    """The backend `attach` hung on `model`, else None."""
    return getattr(model, ATTRIBUTE, None)


def attach(model: Any, backend: Any) -> None:
    setattr(model, ATTRIBUTE, backend)
