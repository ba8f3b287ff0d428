"""The GGUF's int4 weights packed once, kept beside the model's dequantised cache (CPU: the kernel's layout is
fixed per torch version); a later start maps them instead of unpacking and packing ~100 M codes again."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from spd_lsp.engine.fast import int4, q4

log = logging.getLogger(__name__)


def packed_file(directory: Path, dtype: torch.dtype, device: torch.device) -> Path:
    return directory / f"int4-torch{torch.__version__}-{device.type}-{str(dtype).removeprefix('torch.')}.safetensors"


def gguf_int4(gguf: Path, config: Any, *, dtype: torch.dtype, device: torch.device,
              directory: Path | None) -> int4.Packed | None:
    """The GGUF's projections packed as int4 (None unless all are Q4_1), from `directory`'s copy where there is one."""
    from safetensors.torch import load_file, save_file

    started = time.perf_counter()
    path = packed_file(directory, dtype, device) if directory is not None and device.type == "cpu" else None
    in_features = {"qkv": config.hidden_size, "out": config.num_attention_heads * _head_dim(config),
                   "gate_up": config.hidden_size, "down": config.intermediate_size}
    if path is not None and path.is_file():
        try:
            return int4.from_state(load_file(path, device=str(device)), config.num_hidden_layers, in_features)
        except Exception as exc:  # noqa: BLE001 - a damaged copy: pack again
            log.warning("ignoring %s (%s): packing the GGUF's int4 weights again", path, exc)
    groups = q4.q4_1_layers(gguf, config)
    if groups is None:
        return None
    packed = int4.pack(groups, dtype=dtype, device=device)
    if path is not None:
        try:
            staging = Path(tempfile.mkstemp(prefix=path.name, dir=path.parent)[1])
            save_file(int4.packed_state(packed), staging)
            os.replace(staging, path)
        except OSError as exc:
            log.warning("cannot keep the packed int4 weights in %s: %s", path, exc)
    log.info("packed the GGUF's Q4_1 blocks as int4 in %.1f s", time.perf_counter() - started)
    return packed


def _head_dim(config: Any) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
