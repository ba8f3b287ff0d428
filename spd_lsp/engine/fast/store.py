"""Weights the fast path derives from the model's, made once and kept beside its dequantised cache, so that a later
start maps them: the GGUF's int4 weights (CPU: the kernel's layout is fixed per torch version; instead of unpacking
and packing ~100 M codes again) and the int8 output rows (instead of requantising 28 M weights: 0.2-0.3 s a start)."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from spd_lsp.engine.fast import q4
from spd_lsp.engine.fast.layouts import Linear
from spd_lsp.engine.fast.layouts.aten import AtenInt4, Q8Halves
from spd_lsp.engine.fast.layouts.blocks import Int8Rows, Q4Rows, Q8Blocks
from spd_lsp.engine.fast.q8 import gguf_head_blocks

log = logging.getLogger(__name__)


def aten_layout(device: torch.device) -> str:
    """What the layout of ATen's packed int4 weights depends on: the torch version and, on the CPU, the vector ISA
    ATen runs (`torch.backends.cpu.get_cpu_capability()`, which ATEN_CPU_CAPABILITY can lower). It names the files
    that keep them: a cache shared between machines, or a new CPU, packs anew."""
    isa = torch.backends.cpu.get_cpu_capability().lower() if device.type == "cpu" else device.type
    return f"torch{torch.__version__}-{device.type}-{isa}"


def packed_file(directory: Path, dtype: torch.dtype, device: torch.device) -> Path:
    return directory / f"int4-{aten_layout(device)}-{str(dtype).removeprefix('torch.')}.safetensors"


# Columns of layer 0's fused q/k/v weights kept beside the packed weights as the GGUF's own dequantised numbers: a
# later start checks that the packed copy still gives them (`_gives_its_witness`) before it serves.
WITNESS_COLUMNS = 4


Packed = list[dict[str, AtenInt4]]  # per layer, by fused name (`q4.FUSED`)


def pack(layers: list[dict[str, q4.Groups]], *, dtype: torch.dtype, device: torch.device) -> Packed:
    """Per layer, its fused projections packed for ATen (those its kernels cannot take left out: they stay float)."""
    return [{name: AtenInt4.of(*joined.codes_scales_zeros(), dtype=dtype, device=device)
             for name, joined in q4.fused(groups).items() if AtenInt4.packable(*joined.codes.shape, device)}
            for groups in layers]


def packed_state(packed: Packed) -> dict[str, torch.Tensor]:
    return {k: v.contiguous() for i, layer in enumerate(packed) for name, w in layer.items()
            for k, v in w.state(f"{i}.{name}").items()}


def witness(groups: list[dict[str, q4.Groups]]) -> torch.Tensor:
    """The first `WITNESS_COLUMNS` columns of layer 0's fused q/k/v weights, as the blocks' own numbers (fp32)."""
    return q4.fused(groups[0])["qkv"].dequantised()[:, :WITNESS_COLUMNS].contiguous()


def gives_its_witness(weight: Linear, expected: torch.Tensor | None, *, dtype: torch.dtype,
                      device: torch.device) -> bool:
    """`weight` still computes the numbers it was packed from (`expected`: its first `WITNESS_COLUMNS` columns in
    fp32): x = the first unit vectors gives those columns, within the rounding of the kernel's scales to its dtype (at
    most 0.4 % of the largest weight on the bundled model). A layout packed for another ISA or torch gives numbers
    unrelated to them."""
    if expected is None:
        return False
    x = torch.eye(weight.in_features, dtype=dtype, device=device)[:WITNESS_COLUMNS]
    got = weight.mm(x).T.float().cpu()
    if got.shape != expected.shape:
        return False
    # bf16 scales and zeros: a weight off by up to 2^-8 of its group's range, far below a wrong layout's errors
    return bool((got - expected).abs().max() <= 2 ** -6 * expected.abs().max())


def from_state(state: dict[str, torch.Tensor], layers: int, in_features: dict[str, int]) -> Packed:
    """`packed_state`'s tensors back as `Packed` (`in_features`: K of each fused name)."""
    return [{name: AtenInt4(state[f"{i}.{name}.weight"], state[f"{i}.{name}.scales_and_zeros"],
                            in_features=in_features[name])
             for name in q4.FUSED if f"{i}.{name}.weight" in state} for i in range(layers)]


def gguf_int4(gguf: Path, config: Any, *, dtype: torch.dtype, device: torch.device,
              directory: Path | None) -> Packed | None:
    """The GGUF's projections packed as int4 (None unless all are Q4_1), from `directory`'s copy where there is one."""
    started = time.perf_counter()
    path = packed_file(directory, dtype, device) if directory is not None and device.type == "cpu" else None
    in_features = {"qkv": config.hidden_size, "out": config.num_attention_heads * _head_dim(config),
                   "gate_up": config.hidden_size, "down": config.intermediate_size}
    kept = _kept(path, "packing the GGUF's int4 weights again", device=device)
    if kept is not None:
        try:
            packed = from_state(kept, config.num_hidden_layers, in_features)
        except Exception as exc:  # noqa: BLE001 - a damaged copy: pack again
            log.warning("ignoring %s (%s): packing the GGUF's int4 weights again", path, exc)
        else:
            if packed and "qkv" in packed[0] and gives_its_witness(packed[0]["qkv"], kept.get("witness"), dtype=dtype,
                                                                    device=device):
                return packed
            log.warning("ignoring %s (it does not give the GGUF's own numbers: packed for another CPU or torch?): "
                        "packing the GGUF's int4 weights again", path)
    groups = q4.q4_1_layers(gguf, config)
    if groups is None:
        return None
    packed = pack(groups, dtype=dtype, device=device)
    if path is not None:
        _keep({**packed_state(packed), "witness": witness(groups)}, path, "the packed int4 weights")
    log.info("packed the GGUF's Q4_1 blocks as int4 in %.1f s", time.perf_counter() - started)
    return packed


def rows_file(directory: Path) -> Path:
    return directory / "q4-rows.safetensors"  # the GGUF's own bytes laid out: no torch-version dependence


def gguf_rows(path: Path, config: Any, *, directory: Path | None) -> list[dict[str, Q4Rows]] | None:
    """Per layer, its fused projections (`q4.FUSED`) as `Q4Rows` from the GGUF's Q4_1 blocks (None unless every
    projection is Q4_1), from `directory`'s copy where there is one: reading the GGUF took 3.2-4.7 s, nearly all of it
    gguf's parsing of the tokenizer's fields, against 16-20 ms for the copy (66 MB)."""
    kept = _kept(rows_file(directory) if directory is not None else None, "reading the GGUF's Q4_1 rows again")
    if kept is not None:
        try:
            return [{name: Q4Rows(*(kept[f"{i}.{name}.{part}"] for part in Q4Rows._fields))
                     for name in q4.FUSED} for i in range(config.num_hidden_layers)]
        except KeyError as exc:
            log.warning("ignoring %s (no %s): reading the GGUF's Q4_1 rows again", rows_file(directory), exc)
    layers = q4.q4_1_blocks(path, config)
    if layers is None:
        return None
    rows = [{name: Q4Rows.of_blocks([layer[part] for part in parts]) for name, parts in q4.FUSED.items()}
            for layer in layers]
    if directory is not None:
        _keep({f"{i}.{name}.{part}": tensor for i, layer in enumerate(rows) for name, r in layer.items()
               for part, tensor in zip(Q4Rows._fields, r)}, rows_file(directory), "the Q4_1 rows")
    return rows


def int8_file(directory: Path, dtype: torch.dtype) -> Path:
    return directory / f"int8-head-torch{torch.__version__}-{str(dtype).removeprefix('torch.')}.safetensors"


def int8_head(weight: torch.Tensor, *, directory: Path | None) -> Int8Rows:
    """`Int8Rows.of(weight)` (the output projection, on the CPU), from `directory`'s copy where there is one."""
    path = int8_file(directory, weight.dtype) if directory is not None else None
    kept = _kept(path, "quantising the output rows again")
    if kept is not None:
        if set(kept) == {"weight", "scales"} and kept["weight"].shape == weight.shape \
                and kept["scales"].dtype == weight.dtype:
            return Int8Rows(kept["weight"], kept["scales"])
        log.warning("ignoring %s (shaped for another model): quantising the output rows again", path)
    head = Int8Rows.of(weight)
    if path is not None:
        _keep({"weight": head.codes, "scales": head.scales}, path, "the int8 output rows")
    return head


def q8_file(directory: Path, dtype: torch.dtype) -> Path:
    """Where the head's two int4 halves are kept: ATen-packed, so named by `aten_layout` as `packed_file` is."""
    return directory / f"q8-head-{aten_layout(torch.device('cpu'))}-{str(dtype).removeprefix('torch.')}.safetensors"


def gguf_q8_head(gguf: Path, *, dtype: torch.dtype, directory: Path | None) -> Q8Halves | None:
    """The GGUF's Q8_0 output rows as `Q8Halves` (None where they are not Q8_0), from `directory`'s copy where there
    is one (reading and packing them from the GGUF took ~2 s)."""
    path = q8_file(directory, dtype) if directory is not None else None
    kept = _kept(path, "reading the GGUF's Q8_0 output rows again")
    if kept is not None:
        try:
            head = Q8Halves.from_state(kept)
        except Exception as exc:  # noqa: BLE001 - a copy of another layout: read the GGUF again
            log.warning("ignoring %s (%s): reading the GGUF's Q8_0 output rows again", path, exc)
        else:
            if gives_its_witness(head, kept.get("witness"), dtype=dtype, device=torch.device("cpu")):
                return head
            log.warning("ignoring %s (it does not give the GGUF's own numbers: packed for another CPU or torch?): "
                        "reading the GGUF's Q8_0 output rows again", path)
    blocks = gguf_head_blocks(gguf)
    if blocks is None:
        return None
    head = Q8Halves.of(*blocks, dtype=dtype)
    if path is not None:
        codes, scales = blocks
        columns = (codes[:, :WITNESS_COLUMNS].float() * scales[:, :1]).contiguous()  # the first block's
        _keep({**{name: t.contiguous() for name, t in head.state().items()}, "witness": columns}, path,
              "the Q8_0 output rows")
    return head


def _kept(path: Path | None, instead: str, *, device: torch.device | None = None) -> dict[str, torch.Tensor] | None:
    """The tensors kept in `path`, as copies in torch's own (64-byte aligned) memory: safetensors' sit at the file's
    offsets (48 mod 64 here), and `_weight_int8pack_mm` on such a weight crashed the process (SIGSEGV from 4 rows
    up). None where there is no such file or it cannot be read (said, with what happens `instead`)."""
    from safetensors.torch import load_file

    if path is None or not path.is_file():
        return None
    try:
        return {name: tensor.clone() for name, tensor in load_file(path, device=str(device or "cpu")).items()}
    except Exception as exc:  # noqa: BLE001 - a damaged copy: made again
        log.warning("ignoring %s (%s): %s", path, exc, instead)
        return None


def _keep(state: dict[str, torch.Tensor], path: Path, what: str) -> None:
    """`state` written to `path` atomically; where it cannot be, said (the next start makes it again)."""
    from safetensors.torch import save_file

    try:
        staging = Path(tempfile.mkstemp(prefix=path.name, dir=path.parent)[1])
        save_file(state, staging)
        os.replace(staging, path)
    except OSError as exc:
        log.warning("cannot keep %s in %s: %s", what, path, exc)


def _head_dim(config: Any) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def q8_blocks_file(directory: Path) -> Path:
    return directory / "q8-blocks.safetensors"  # the GGUF's own Q8_0 head: no torch-version dependence


def gguf_q8_blocks(gguf: Path, *, directory: Path | None) -> Q8Blocks | None:
    """The GGUF's output projection as its Q8_0 blocks (`Q8Blocks`: codes and fp16 scales, its own numbers; None
    where it is not Q8_0), from `directory`'s copy where there is one (reading the GGUF took ~2 s)."""
    path = q8_blocks_file(directory) if directory is not None else None
    kept = _kept(path, "reading the GGUF's Q8_0 blocks again")
    if kept is not None:
        try:
            return Q8Blocks(kept["codes"], kept["scales"])
        except KeyError as exc:
            log.warning("ignoring %s (no %s): reading the GGUF's Q8_0 blocks again", path, exc)
    blocks = gguf_head_blocks(gguf)
    if blocks is None:
        return None
    codes, scales = blocks
    head = Q8Blocks(codes.contiguous(), scales.half().contiguous())  # the GGUF's fp16 scales, exactly
    if path is not None:
        _keep({"codes": head.codes, "scales": head.scales}, path, "the Q8_0 head blocks")
    return head
