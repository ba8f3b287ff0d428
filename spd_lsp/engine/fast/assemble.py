"""`build`: a `FastBackend` for a loaded model, on the plan resolved for it (`plan.py`).

The plan names how each projection is computed once our kernel library is loaded; until then (it is built off the
load, in the compile thread) the plan without the library serves, and its weights are made here: int4 on ATen's kernels
from the GGUF's Q4_1 blocks (or quantised from the float weights), the head as the GGUF's Q8_0 blocks in two int4 halves
or as int8 rows, else the float weights. What the full plan needs besides (the GGUF's blocks as they are) is read by
the backend when it applies the plan (`Sources`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

HEADS = ("float", "int8", "q8")  # the `head` setting (`Settings.output_weights`)


def build(model: Any, *, gguf: Path | None = None, quantize: str | None = None, compile: bool = True,
          cache: Path | None = None, head: str = "float", left_out: tuple[str, ...] = ()) -> Any:
    """A `FastBackend` on `model`'s weights; raises ValueError where its family or device is not covered.

    int4 for decode steps: the GGUF's own Q4_1 blocks where every projection of `gguf` is Q4_1 (the same numbers as
    the dequantised weights); `quantize="int4"`: quantised from the float weights (an explicit choice: it changes the
    numbers); else the float weights. `cache`: the model's cache directory (derived weights kept for later starts).
    `head`: the output projection in CPU decode steps: "q8" (the GGUF's own Q8_0 blocks where it holds them so, else
    int8 rows), "int8" (rows requantised from the float head: a choice) or "float". `left_out`: what the `kernels`
    setting leaves out (`plan.KERNELS`).
    """
    import torch

    from spd_lsp.engine.kernels import build as kernel_library
    from spd_lsp.engine.fast import q4
    from spd_lsp.engine.fast.gguf_model import GGUFLM

    if isinstance(model, GGUFLM):
        return build_gguf(model, compile=compile, left_out=left_out)
    from spd_lsp.engine.fast.backend import FastBackend, Sources
    from spd_lsp.engine.fast.layouts.aten import Int8Aten
    from spd_lsp.engine.fast.layouts.blocks import Q4Rows
    from spd_lsp.engine.fast.light import LightLM
    from spd_lsp.engine.fast.model import FastLM, unsupported
    from spd_lsp.engine.fast.plan import Choice, ModelFacts, Target, resolve
    from spd_lsp.engine.fast.store import gguf_int4, gguf_q8_blocks, gguf_q8_head, gguf_rows, int8_head, pack
    from spd_lsp.engine.kernels import onednn

    reason = unsupported(getattr(model, "config", None))
    device = model.get_input_embeddings().weight.device
    if reason is None and device.type not in ("cpu", "cuda"):
        reason = f"device {device.type}"
    if reason is None and getattr(model, "spd_weights_handed_over", False):
        reason = "a model whose float weights an earlier fast backend took over (`fast.attached(model)` has it)"
    if reason:
        raise ValueError(reason)
    if head not in HEADS:
        raise ValueError(f"head {head!r}: one of {', '.join(HEADS)}")
    if quantize == "int4" and device.type not in ("cpu", "cuda"):
        raise ValueError(f"int4 weights on {device.type}")
    dtype = model.get_input_embeddings().weight.dtype
    config = model.config
    layers = config.num_hidden_layers

    # What the model's weights are: the GGUF's Q4_1 blocks, int4 quantised from the float weights, or float.
    packed = gguf_int4(gguf, config, dtype=dtype, device=device, directory=cache) if gguf is not None else None
    groups = quantised = None
    if packed is None and quantize == "int4":
        groups = [{name: q4.quantise(getattr(getattr(layer, part), name).weight)
                   for part, names in (("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")),
                                       ("mlp", ("gate_proj", "up_proj", "down_proj")))
                   for name in names} for layer in model.model.layers]
        packed = pack(groups, dtype=dtype, device=device)
        if device.type == "cpu":  # the same groups as rows for our kernel, made now: the int32 codes are not kept
            quantised = [{name: Q4Rows.of_groups(*joined.codes_scales_zeros()) for name, joined in q4.fused(layer).items()}
                         for layer in groups]
        groups = None
    layout = "q4_1" if packed is not None and gguf is not None else "int4" if packed is not None else "float"
    head_blocks = None
    if device.type != "cpu" or head == "float":
        head_layout = "float"
    elif head == "q8" and gguf is not None:
        head_blocks = gguf_q8_blocks(gguf, directory=cache)
        head_layout = "q8_0" if head_blocks is not None else "int8"
    else:
        head_layout = "int8"
    facts = ModelFacts(family=config.model_type, head_dim=getattr(config, "head_dim", None)
                       or config.hidden_size // config.num_attention_heads,
                       layouts={role: layout for role in ("qkv", "out", "gate_up", "down")}, head=head_layout,
                       blocks_exact=layout == "q4_1",
                       biases_outside_qkv=any(getattr(l.self_attn.o_proj, "bias", None) is not None
                                              for l in model.model.layers),
                       shared_float_weights=not isinstance(model, LightLM))
    target = Target(device.type, str(dtype).removeprefix("torch."),
                    kernel_library.profile() if device.type == "cpu" else None, onednn_bf16=onednn.bf16_available())
    plan = resolve(facts, target, left_out=left_out, compile=compile)
    now = plan.without_library("not loaded yet")

    # The weights the plan without the library runs on (decode tier); the full plan's are made by the backend.
    decode = [{role: packed[index][role] for role in ("qkv", "out", "gate_up", "down")
               if role in packed[index] and now.role(role).decode.kernel in ("aten", "tinygemm")}
              for index in range(layers)] if packed is not None else None
    int8_rows = None
    head_linear = None
    head_now = now.role("head").decode
    if plan.role("head").decode == Choice("q8_0", "matvec"):
        pass  # the float head until our kernel loads (no second copy of the blocks made for the while)
    elif head_now.layout == "q8_0 (two int4 halves)":
        head_linear = gguf_q8_head(gguf, dtype=dtype, directory=cache)
    elif head_now.layout == "int8 rows":
        int8_rows = int8_head(model.get_output_embeddings().weight, directory=cache)
        head_linear = Int8Aten(int8_rows)
    with torch.no_grad():  # not inference tensors: transformers' own forward still runs on the shared weights
        lm = FastLM.of_module(model, decode, head=head_linear)

    def rows() -> list[dict[str, Q4Rows]] | None:
        if gguf is not None and layout == "q4_1":
            return gguf_rows(gguf, config, directory=cache)
        return quantised

    sources = Sources(rows=rows, head_blocks=(lambda: head_blocks) if head_blocks is not None else None,
                      int8_rows=(lambda: int8_rows or int8_head(model.get_output_embeddings().weight,
                                                                  directory=cache)) if head_layout == "int8" else None)
    return FastBackend(lm, plan=plan, sources=sources)


def build_gguf(model: Any, *, compile: bool = True, left_out: tuple[str, ...] = ()) -> Any:
    """A `FastBackend` on a model read from a GGUF's blocks (`gguf_model.GGUFLM`): its plan from the file's weight
    types; every tier computes from the blocks (no float copy)."""
    from spd_lsp.engine.kernels import build as kernel_library
    from spd_lsp.engine.fast.backend import FastBackend
    from spd_lsp.engine.fast.plan import ModelFacts, Target, resolve
    from spd_lsp.engine.kernels import onednn

    lm = model.lm

    def layout(role: str) -> str:
        kinds = sorted({kind.lower() for joined in model.types[role] for kind in joined.split("+")})
        return "+".join(kinds)

    facts = ModelFacts(family=lm.arch.family, head_dim=lm.arch.head_dim,
                       layouts={role: layout(role) for role in ("qkv", "out", "gate_up", "down")}, head=layout("head"),
                       blocks_exact=True, biases_outside_qkv=any(b.out.bias is not None for b in lm.blocks),
                       from_blocks=True, float_copy_bytes=sum(2 * p.prefill.out_features * p.prefill.in_features
                                                              for p in lm.projections()[:-1]))
    target = Target(lm.device.type, str(lm.dtype).removeprefix("torch."),
                    kernel_library.profile() if lm.device.type == "cpu" else None, onednn_bf16=onednn.bf16_available())
    return FastBackend(lm, plan=resolve(facts, target, left_out=left_out, compile=compile))
