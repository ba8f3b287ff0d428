"""The one home of loading a model into an engine: files to a ready `LocalEngine` and its description."""

from __future__ import annotations

from spd_lsp.api import Loaded, ModelSpec
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import load_model


def load_local(spec: ModelSpec = ModelSpec(), *, compile: bool = True) -> Loaded:
    """The model `spec` names (bundled default, a .gguf file or a local Hugging Face directory) in a `LocalEngine`.
    `compile`: the fast path's decode step (False: eager, for a one-request process)."""
    loaded = load_model(spec.path, spec.device, spec.dtype, spec.quantize, fast=spec.fast_path, compile=compile,
                        head=spec.head, kernels=spec.kernels)
    engine = LocalEngine(loaded)  # its warm-up compiles the fast path's step
    # The fast path's own status dict (fastPath, weights, compiled, compileReason, compileSeconds), so that it stays
    # current should a later step fall back to eager; transformers' forward says why it runs.
    info = loaded.fast if loaded.fast is not None else {"fastPath": False, "reason": "fastPath off or int8"}
    if not info["fastPath"]:
        info.update(compiled=False, compileReason=f"transformers' forward: {info['reason']}")
    info.update(name=loaded.name, source=loaded.source, device=str(loaded.device),
                dtype=str(loaded.dtype).removeprefix("torch."), loadSeconds=round(loaded.load_s, 3))
    if loaded.cache_note:
        info["modelCache"] = loaded.cache_note  # why it loads from the GGUF in memory (spd.status says it)
    return Loaded(engine, info, loaded.device.type)
