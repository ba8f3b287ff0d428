"""The fast decode path (issue 21): our own Llama-family forward, int4 weights, a compiled step.

`build` makes a `FastBackend` for a loaded transformers model and `attach` hangs it on the model,
where every `ModelRunner` of that model finds it (`attached`); other families keep transformers' forward.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import platformdirs

log = logging.getLogger(__name__)


def compile_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("spd-lsp")) / "torch-compile"


_cache_problem: list[str] = []  # why the compile cache cannot be written (then the step runs eager)


def use_compile_cache() -> Path:
    """Point inductor's (and Triton's) caches at the user cache, unless the environment already does. Called when
    spd_lsp.engine.model is imported: inductor fixes its directory the first time anything asks for it.

    A cache that cannot be written (a full disk, a file where its directory should be, no permission): the step
    runs eager (`compile_cache_problem` says why; `compile.why_not` returns it), and inductor is pointed at the
    nearest directory that exists, which torch only checks when `torch._dynamo` is imported (it raised there,
    and the engine exited, on a cache directory it could not create)."""
    root = compile_cache_dir()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(root / "triton"))
    inductor = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    problem = _unwritable(inductor)
    if problem and not _cache_problem:
        _cache_problem.append(f"cannot write the compile cache under {inductor}: {problem}; the decode step runs "
                              "eager (free space there or point TORCHINDUCTOR_CACHE_DIR at another disk)")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(_existing_directory(inductor))
        log.warning("%s", _cache_problem[0])
    return root


def compile_cache_problem() -> str | None:
    """Why the compile cache cannot be written, if it cannot (`use_compile_cache` found it)."""
    return _cache_problem[0] if _cache_problem else None


def _unwritable(directory: Path) -> str | None:
    """Why `directory` cannot hold the compile cache (made if missing, a file written there), or None."""
    import tempfile

    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()  # a full disk refuses the write itself (space is reserved at write time)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _existing_directory(path: Path) -> Path:
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path

from spd_lsp.engine.decoding.backends import attach, attached  # noqa: E402,F401  (re-exported)


HEADS = ("float", "int8", "q8")  # "q8": the GGUF's Q8_0 blocks (fast/q8.py)


def build(model: Any, *, gguf: Path | None = None, quantize: str | None = None, compile: bool = True,
          cache: Path | None = None, head: str = "float") -> Any:
    """A `FastBackend` on `model`'s weights; raises ValueError where its family or device is not covered.

    int4 for the decode step: the GGUF's own Q4_1 blocks where every projection of `gguf` is Q4_1 (the same
    numbers as the dequantised weights); `quantize="int4"`: quantised from the float weights otherwise (an
    explicit choice: it changes the numbers); else the float weights throughout. `cache`: a directory to keep
    the packed GGUF weights and the int8 output rows in (the model's cache), so that later starts skip making them.
    `head="q8"`: on the CPU, the output projection of decode steps as the GGUF's own Q8_0 blocks where `gguf` holds
    them so (`q8.py`: the same numbers; on our kernel where it runs, else as two int4 halves), else int8 rows;
    `head="int8"`: as int8 rows (`int8.py`: a requantisation, so a choice; the weights string says so); else (and on
    CUDA: tinygemm has no int8 kernel here) its float weight.
    """
    import torch

    from spd_lsp.engine.fast import int4, matvec, onednn, q4
    from spd_lsp.engine.fast.light import LightLM
    from spd_lsp.engine.fast.backend import FastBackend
    from spd_lsp.engine.fast.model import FastLM, unsupported
    from spd_lsp.engine.fast.kernels import bf16_matvec
    from spd_lsp.engine.fast.q8 import Q8Weight
    from spd_lsp.engine.fast.store import gguf_int4, gguf_q8_blocks, gguf_q8_head, gguf_rows, int8_head

    reason = unsupported(getattr(model, "config", None))
    device = model.get_input_embeddings().weight.device
    if reason is None and device.type not in ("cpu", "cuda"):
        reason = f"device {device.type}"
    if reason is None and getattr(model, "spd_weights_handed_over", False):
        reason = "a model whose float weights an earlier fast backend took over (`fast.attached(model)` has it)"
    if reason:
        raise ValueError(reason)
    dtype = model.get_input_embeddings().weight.dtype
    packed, weights = None, f"{str(dtype).removeprefix('torch.')}"
    rows = None  # what `FastBackend.prepare` moves onto our matvec kernels (`matvec.py`)
    if int4.supported(device):
        if gguf is not None:
            packed = gguf_int4(gguf, model.config, dtype=dtype, device=device, directory=cache)
        if packed is not None:
            weights = f"int4 from the GGUF's Q4_1 blocks (decode), {weights} (prefill)"
            # read there (from the model's cache after the first start: the GGUF's parsing took 3-5 s)
            rows = lambda: gguf_rows(gguf, model.config, directory=cache)  # noqa: E731
        elif quantize == "int4":
            groups = [{name: q4.quantise(getattr(getattr(layer, part), name).weight)
                       for part, names in (("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")),
                                           ("mlp", ("gate_proj", "up_proj", "down_proj")))
                       for name in names} for layer in model.model.layers]
            packed = int4.pack(groups, dtype=dtype, device=device)
            weights = f"int4 quantised from the float weights (decode), {weights} (prefill)"
            if device.type == "cpu":  # the same groups for our kernel, made now: the int32 codes are not kept
                quantised = [{name: matvec.of_groups(joined) for name, joined in int4.fused(layer).items()}
                             for layer in groups]
                rows = lambda: quantised  # noqa: E731
    elif quantize == "int4":
        raise ValueError(f"int4 weights on {device.type}")
    if head not in HEADS:
        raise ValueError(f"head {head!r}: one of {', '.join(HEADS)}")
    head_int8 = None
    blocks = None  # the GGUF's Q8_0 head blocks, where read now (the AMX trees take the same object)
    if head in ("int8", "q8") and device.type == "cpu":
        # "q8": the GGUF's own Q8_0 blocks where it has them (the same numbers): as they are on our kernel where it
        # runs (bf16, AVX-512 BF16), else as two int4 halves (`q8.py`); else rows requantised from the float head.
        if gguf is not None and head == "q8" and dtype == torch.bfloat16 and bf16_matvec():
            blocks = gguf_q8_blocks(gguf, directory=cache)
        if blocks is not None:
            head_int8 = Q8Weight(blocks, model.get_output_embeddings().weight.detach())
            weights += ", the GGUF's Q8_0 output blocks (decode)"
        elif gguf is not None and head == "q8":
            head_int8 = gguf_q8_head(gguf, dtype=dtype, directory=cache)
            if head_int8 is not None:
                weights += ", the GGUF's Q8_0 output rows (decode)"
        if head_int8 is None:
            head_int8 = int8_head(model.get_output_embeddings().weight, directory=cache)
            weights += ", int8 output rows (decode)"
    with torch.no_grad():  # not inference tensors: transformers' own forward still runs on the shared weights
        lm = FastLM(model, packed, head=head_int8)
    # The light model (never run by transformers) hands its float weights over to oneDNN's layout where that is
    # faster: in the compile thread, before the step's first compile (`FastBackend.prepare`).
    # The int4 projections (on `rows`) and the int8 head move onto our CPU kernels in the compile thread too, where they
    # are built (`matvec.py`).
    return FastBackend(lm, compile=compile, weights=weights,
                       pack=onednn.wanted(dtype, device) and isinstance(model, LightLM), rows=rows,
                       rows_exact=packed is not None and gguf is not None,
                       head_blocks=(lambda: blocks or gguf_q8_blocks(gguf, directory=cache)) if gguf is not None else None)
