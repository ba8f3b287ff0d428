"""The one home of loading a model into an engine: files to a ready `LocalEngine` and its description."""

from __future__ import annotations

from spd_lsp.api import Loaded
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import load_model


def load_local(model: str | None, device: str = "auto", dtype: str = "auto", quantize: str | None = None) -> Loaded:
    """The model (bundled default, a .gguf file or a local Hugging Face directory) in a `LocalEngine`."""
    loaded = load_model(model, device, dtype, quantize)
    info = {
        "name": loaded.name,
        "source": loaded.source,
        "device": str(loaded.device),
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "loadSeconds": round(loaded.load_s, 3),
    }
    return Loaded(LocalEngine(loaded), info, loaded.device.type)
