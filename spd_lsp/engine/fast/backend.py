"""The fast path of a `ModelRunner`: `FastLM` for every forward, a compiled step for plain decode steps.

A plain decode step is one input embedding a row ([B, 1, H], superposed or not) on a bucketed cache
(`cache.py`) whose rows all hold the same positions (one request's prompt, or its forked rows): the
step writes its key/values at column `length` of the fixed buffers and attends to the whole buffer
masked past it, so its shapes are (rows, bucket) and nothing syncs with the host. The engine batch's
left-padded rows (each at its own position, a padding mask per row) take a second compiled step of the same
form. Verification's prefix trees (`tree`: the drafts' tokens packed under a tree mask) take a third, their width
padded up to one of `TREE_WIDTHS`. Anything else (prefill chunks) runs `FastLM` eagerly on the cache it is given.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable

import torch
from transformers import DynamicCache

from spd_lsp.engine.fast import amx, attention, fused, kernels, matvec
from spd_lsp.engine.fast.cache import BucketLayer, bucket_cache, bucketed
from spd_lsp.engine.fast.compile import Compiled, mark_dynamic
from spd_lsp.engine.fast.matvec import Rows
from spd_lsp.engine.fast.amx import AMX_MIN_TOKENS
from spd_lsp.engine.fast.model import INT4_MAX_TOKENS, FastLM, Write

log = logging.getLogger(__name__)


# On the CPU a verification tree runs at its own width (one graph, the width dynamic: a 16-node tree padded to 32 ran
# twice its tokens; docs/performance-step.md, round 10); at most the widest of these. Elsewhere (CUDA graphs record
# fixed shapes) the widths a tree is padded to (a compiled graph each, ~45 MB of RSS: 16 and 32 took +92 MB): the
# shipped k = 3 drafts of at most 10 tokens make at most 27 nodes (a draft's last token is not run), so one graph
# serves them; k > 3 may need the second. Wider trees run eager. A request's verification took 53.1 ms against
# 64.9 eager (bundled model, 2 cores, load 3.3; 45 against 53 ms a 30-node tree alone, load ~1.5).
TREE_WIDTHS = (32, 64)

# Inductor options of the CPU's graphs:
# - the generated wrapper's checks of every input's sizes, strides and alignment are left out (~640 calls a step,
#   which dynamo's guards on the same tensors already did): one row's step 12.0 ms (min 11.6) against 12.5 (12.2),
#   `bench_step --only "fast compiled int4+int8 head,fast compiled int4+int8 head checked"`, load 1.3;
# - the wrapper is C++ (`cpp_wrapper`), not Python: a step's ~330 calls (its kernels, int4 matmuls, attention) leave
#   the interpreter. One row's step 17.8 ms (min 16.8) against 19.9 (19.1) with the Python wrapper, the same logits
#   bit for bit (`bench_step --only "fast compiled int4+int8 head,fast compiled int4+int8 head python-wrapper"`,
#   11 rounds, slow machine); a first compile of the step took 73 s against 58.
CPU_INDUCTOR = {"size_asserts": False, "scalar_asserts": False, "alignment_asserts": False, "cpp_wrapper": True}


def written_at(columns: torch.Tensor, keys: list[torch.Tensor], values: list[torch.Tensor]) -> Write:
    """`FastLM.forward`'s `write` into fixed buffers: a layer's new key/values at `columns` of its buffers (per layer
    [B, kv heads, bucket, D]), with `index_copy_` (nothing syncs with the host); it attends to the whole buffers."""
    def write(index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keys[index].index_copy_(2, columns, k)
        values[index].index_copy_(2, columns, v)
        return keys[index], values[index]

    return write


class FastBackend:
    def __init__(self, lm: FastLM, *, compile: bool = True, weights: str = "float", pack: bool = False,
                 rows: Callable[[], list[dict[str, Rows]] | None] | None = None, rows_exact: bool = False,
                 head_blocks: Callable[[], amx.Q8Blocks | None] | None = None) -> None:
        self.lm = lm
        # `prepare` moves the decode step's int4 projections (on `rows()`: the same weights as Q4_1 rows) and int8 head
        # onto our matvec kernels, where they are built (`matvec.py`); `rows` None: the int8 head only.
        self.rows = rows
        # The rows hold the float weights' own numbers (the GGUF's blocks, which the float weights were dequantised
        # from), so forwards that would run the float weights may run the rows instead (`use_amx`); not so for int4
        # quantised from float weights (an approximation, chosen for decode steps only).
        self.rows_exact = rows_exact
        self.head_blocks = head_blocks  # the output projection as the GGUF's Q8_0 blocks (its own numbers), for AMX
        self.matvec_pending = lm.device.type == "cpu" and lm.dtype == torch.bfloat16
        # `prepare` packs the float layers (`FastLM.pack_layers`) where this is set, once: before the first compile of
        # any of the three graphs (each compiles in a thread of its own), so that none is traced on the plain weights.
        self.pack = pack
        self._preparing = threading.Lock()
        # The plain step attends on the CPU kernel (`attention.py`) once it is built, which its compile does first
        # (CPU, bf16/fp32); bench_step's `sdpa-attention` variant sets this False: SDPA always.
        self.wants_kernel = lm.device.type == "cpu" and lm.dtype in (torch.bfloat16, torch.float32)
        # Read by `step_tensors` (a guard of its graph): set once, by `use_kernel`, before the step's first compile.
        self.kernel = False
        self.device = lm.device
        self.weights = weights
        # What `spd.status` shows of it: one dict, kept current as the step compiles or falls back to eager.
        self.info: dict[str, Any] = {"fastPath": True, "weights": weights,
                                     "weightMegabytes": {"decode": round(lm.weight_bytes(int4=True) / 1e6, 1),
                                                         "float": round(lm.weight_bytes(int4=False) / 1e6, 1)}}
        # The plain step's weights and kernels in one C++ call (`fused.py`), made by `prepare` where it can serve:
        # then its graph is not compiled for the shapes it takes (at most INT4_MAX_TOKENS rows).
        self.fused: torch.ScriptObject | None = None
        self.wants_fused = self.wants_kernel and lm.dtype == torch.bfloat16
        self.step_fn = Compiled(self.step_tensors, lm.device, enabled=compile, status=self.info, inductor=CPU_INDUCTOR,
                                before_compile=self.prepare, served_otherwise=self.fused_serves)
        # The engine batch's left-padded rows (positions and padding per row): a graph of their own.
        self.info["paddedStep"] = {}
        self.padded_fn = Compiled(self.padded_step_tensors, lm.device, enabled=compile, status=self.info["paddedStep"],
                                  inductor=CPU_INDUCTOR, before_compile=self.prepare)
        self.info["treeStep"] = {}
        # Verification's trees at their own width on the CPU (`tree`); padded to TREE_WIDTHS where graphs are recorded.
        self.exact_width = lm.device.type == "cpu"
        self.tree_fn = Compiled(self.tree_tensors, lm.device, enabled=compile, status=self.info["treeStep"],
                                inductor=CPU_INDUCTOR, before_compile=self.prepare)
        self.steps = 0
        self.trees = 0  # verification trees run through `tree`

    def prepare(self) -> None:
        """Before a graph's compile, in the thread that compiles it: the float layers packed (where `pack` is set; once,
        the other graphs' threads waiting) and the attention kernel built (`use_kernel`). A backend that never compiles
        stays as it was built."""
        with self._preparing:
            if self.pack:
                started = time.perf_counter()
                self.lm.pack_layers()
                self.pack = False
                self.info["weights"] += ", float layers in oneDNN's blocked layout (prefill, trees)"
                log.info("the float layers packed in oneDNN's layout in %.1f s", time.perf_counter() - started)
            self.use_kernel()
            self.use_matvec()
            self.use_amx()
            self.use_fused()

    def use_amx(self) -> None:
        """After `use_matvec`, once: forwards of a few dozen rows (verification's trees, batches) on the GGUF's blocks
        on AMX (`amx.py`) where the CPU has AMX's tiles: the int4 projections, and the head where its Q8_0 blocks are
        given; `spd.status`: `amx` says what moved, or why nothing did."""
        if "amx" in self.info or self.lm.device.type != "cpu" or self.lm.dtype != torch.bfloat16:
            return
        if os.environ.get(amx.ENV, "1") == "0":
            self.info["amx"] = f"{amx.ENV}=0"
        elif not self.rows_exact:
            self.info["amx"] = "int4 rows not the float weights' own numbers (quantised from them)"
        elif not kernels.amx_ready():
            self.info["amx"] = kernels.reason() or "this CPU has no AMX tiles"
        else:
            head = self.head_blocks() if self.head_blocks is not None else None
            moved = self.lm.use_amx(head)
            self.info["amx"] = (f"{' and '.join(moved)} for {amx.AMX_MIN_TOKENS}-{amx.AMX_MAX_TOKENS} rows" if moved
                                else "no weights the kernels take")
            if moved:
                self.info["weights"] += f", {self.info['amx']} on AMX"
        self.head_blocks = None

    def use_fused(self) -> None:
        """After `use_matvec`, once: the fused step (`fused.py`) where it can serve this model; `spd.status`:
        `fusedStep` is True, or says why not."""
        if not self.wants_fused:
            return
        self.wants_fused = False
        reason = fused.why_not(self.lm)
        if reason is None:
            try:
                self.fused = fused.build(self.lm)
            except Exception as exc:  # noqa: BLE001 - a refused model: the compiled step serves
                reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        self.info["fusedStep"] = True if reason is None else reason
        if reason is None:
            log.info("plain decode steps of up to %d rows run the fused step", self.fused_rows)
        else:
            log.info("plain decode steps run the compiled graph (no fused step: %s)", reason)

    @property
    def fused_rows(self) -> int:
        """The most rows a plain step the fused step takes: those the int4 matvec kernel serves best (where AMX is on,
        more rows run its int4 projections in the graph)."""
        return AMX_MIN_TOKENS - 1 if self.lm.blocks[0].qkv.amx is not None else INT4_MAX_TOKENS

    def fused_serves(self, args: tuple[Any, ...]) -> str | None:
        """`step_fn`'s `served_otherwise`: why a plain step shaped as `args` needs no graph (the fused step takes it)."""
        if self.fused is not None and args[0].shape[0] <= self.fused_rows:
            return f"the fused step serves plain steps of up to {self.fused_rows} rows"
        return None

    def use_kernel(self) -> None:
        """Before the step compiles: build (or load) the attention kernels; the step attends on it from then on, eager
        steps included, and a bf16 prompt's causal attention where the CPU has AVX-512 BF16 (`promptKernel`), and the bf16
        eager forward's norms, rotary and SiLU on pointwise.cpp (`pointwiseKernels`; neither with
        `SPD_LSP_PREFILL_KERNEL=0`). Where they cannot be built, SDPA (`spd.status`: `attentionKernel` says why)."""
        if self.wants_kernel and not self.kernel:
            self.kernel = kernels.build()
            self.info["attentionKernel"] = True if self.kernel else kernels.reason()
            self.lm.prompt_kernel = (self.lm.dtype == torch.bfloat16 and kernels.matvec_ready()
                                     and os.environ.get(attention.PROMPT_ENV, "1") != "0")
            self.info["promptKernel"] = self.lm.prompt_kernel
            self.lm.pointwise = (self.lm.dtype == torch.bfloat16 and self.kernel
                                 and os.environ.get(attention.PROMPT_ENV, "1") != "0")
            self.info["pointwiseKernels"] = self.lm.pointwise

    def use_matvec(self) -> None:
        """After `use_kernel`, once: the decode step's int4 projections and int8 head onto our kernels (`matvec.py`)
        where they are built (AVX-512 BF16) and not turned off (`SPD_LSP_MATVEC=0`); `spd.status`: `matvec` says
        what moved, or why nothing did."""
        if not self.matvec_pending:
            return
        self.matvec_pending = False
        if os.environ.get(matvec.ENV, "1") == "0":
            self.info["matvec"] = f"{matvec.ENV}=0"
        elif not kernels.matvec_ready():
            self.info["matvec"] = kernels.reason() or "this CPU has no AVX-512 BF16"
        else:
            started = time.perf_counter()
            moved = self.lm.use_matvec(self.rows() if self.rows is not None else None)
            self.rows = None
            self.info["matvec"] = ", ".join(moved) or "nothing to move"
            if moved:
                self.info["weights"] += f", {' and '.join(moved)} on our matvec kernels (decode)"
            log.info("decode steps' %s on our matvec kernels in %.2f s", ", ".join(moved), time.perf_counter() - started)

    def new_cache(self) -> DynamicCache:
        return bucket_cache(self.lm.layers)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.lm(*args, **kwargs)

    def step_tensors(self, x: torch.Tensor, column: torch.Tensor, keys: list[torch.Tensor],
                     values: list[torch.Tensor]) -> torch.Tensor:
        """Logits [B, 1, V] of inputs x [B, 1, H] at position `column` [1] of every row, written there into `keys`/`values`
        (per layer [B, kv heads, bucket, D]); what it attends to: the columns up to `column`."""
        if self.kernel:  # the kernel reads columns 0..column only: no mask
            return self._step(x, column, keys, values, column.expand(x.shape[0], 1), attention.Upto(column))
        visible = torch.arange(keys[0].shape[2], device=x.device) <= column
        return self._step(x, column, keys, values, column.expand(x.shape[0], 1), visible[None, None, None, :])

    def padded_step_tensors(self, x: torch.Tensor, column: torch.Tensor, keys: list[torch.Tensor],
                            values: list[torch.Tensor], positions: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        """`step_tensors` for left-padded rows: each at its own `positions` [B, 1], attending where `padding` [B, bucket]
        is True and at most up to `column` (transformers' 2-D mask joined with causality, as `FastLM.mask` does)."""
        visible = (torch.arange(keys[0].shape[2], device=x.device) <= column)[None, :] & padding
        return self._step(x, column, keys, values, positions, visible[:, None, None, :])

    def tree_tensors(self, x: torch.Tensor, columns: torch.Tensor, keys: list[torch.Tensor], values: list[torch.Tensor],
                     positions: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """Logits [B, W, V] of W tokens x [B, W, H] at `positions` [B, W], their key/values written at `columns` [W] of
        `keys`/`values`; `visible` [B, 1, W, S]: what each token attends to of the buffers' first S columns (the rest,
        the bucket's unused tail, is never read)."""
        span = visible.shape[-1]
        write = written_at(columns, keys, values)

        def live(index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            key, value = write(index, k, v)
            return key[:, :, :span], value[:, :, :span]

        return self.lm.forward(x, positions, visible, live)

    @torch.inference_mode()
    def tree(self, cache: Any, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
        """Logits [B, n, V] of verification's packed trees, ids [B, n] at `positions` [B, n] under `mask`
        [B, 1, n, length + n] (additive: 0 attends), appended to `cache` as `lm` would (its length grows by n);
        through `tree_tensors`: on the CPU at its own width (one graph, the width a dynamic size), elsewhere padded to
        the next of `TREE_WIDTHS` (fixed shapes for CUDA graphs), the padding tokens at the first one's position and
        seeing what it sees of the prompt. None where this is not one (the caller runs `lm`)."""
        batch, n = ids.shape
        width = next((w for w in TREE_WIDTHS if w >= n), None)
        # A tree of at most INT4_MAX_TOKENS tokens runs eager, where its projections (and the int8 head) take the
        # decode weights: padded, it would take the float ones, and answer otherwise than an engine batch's eager
        # verification of the same drafts (the Ray replicas' scores differed by 2.7e-4 from a local engine's).
        if width is None or batch * n <= INT4_MAX_TOKENS or not bucketed(cache):
            return None
        if self.exact_width:
            width = n
        layers: list[BucketLayer] = cache.layers
        length = layers[0].length
        if (batch != layers[0].key_buffer.shape[0] or any(layer.length != length for layer in layers)
                or tuple(mask.shape) != (batch, 1, n, length + n) or tuple(positions.shape) != (batch, n)):
            return None
        for layer in layers:
            layer.reserve(length + width)
            for buffer in (layer.key_buffer, layer.value_buffer):
                mark_dynamic(buffer, 2)
        device = self.device
        keys, values = [l.key_buffer for l in layers], [l.value_buffer for l in layers]
        padded = torch.zeros(batch, width, dtype=torch.long, device=device)
        padded[:, :n] = ids.to(device)
        at = positions.to(device)
        where = at[:, :1].expand(batch, width).clone()
        where[:, :n] = at
        visible = torch.zeros(batch, 1, width, length + width, dtype=torch.bool, device=device)
        visible[:, :, :n, : length + n] = mask.to(device) == 0
        visible[:, :, n:, :length] = visible[:, :, :1, :length]
        columns = torch.arange(length, length + width, device=device)
        x = self.lm.embedding(padded)
        mark_dynamic(visible, 3)
        if self.exact_width:
            for tensor, dim in ((x, 1), (columns, 0), (where, 1), (visible, 2)):
                mark_dynamic(tensor, dim)
        logits = self.tree_fn(x, columns, keys, values, where, visible)
        for layer in layers:
            layer.length = length + n
        self.trees += 1
        return logits[:, :n]

    def _step(self, x: torch.Tensor, column: torch.Tensor, keys: list[torch.Tensor], values: list[torch.Tensor],
              positions: torch.Tensor, mask: torch.Tensor | attention.Upto) -> torch.Tensor:
        return self.lm.forward(x, positions, mask, written_at(column, keys, values), last_only=True)

    def _graph_step(self, embeds: torch.Tensor, length: int, keys: list[torch.Tensor], values: list[torch.Tensor],
                    attention_mask: torch.Tensor | None, position_ids: torch.Tensor | None) -> torch.Tensor:
        """`step`'s compiled graphs (eager until they are ready): the plain one, or the padded rows' one."""
        column = torch.tensor([length], device=self.device)
        # Always an inference tensor (made here, in inference mode): dynamo guards on the difference, and a warm
        # request's last prompt token came as one, its superposed steps' embeddings not: two graphs compiled.
        embeds = embeds if embeds.is_inference() else embeds.clone()
        if attention_mask is None:
            return self.step_fn(embeds, column, keys, values)
        padding = torch.zeros(embeds.shape[0], keys[0].shape[2], dtype=torch.bool, device=self.device)
        padding[:, : length + 1] = attention_mask.to(self.device).bool()
        mark_dynamic(padding, 1)
        return self.padded_fn(embeds, column, keys, values, position_ids.to(self.device), padding)

    @torch.inference_mode()
    def step(self, cache: Any, embeds: torch.Tensor, attention_mask: torch.Tensor | None = None,
             position_ids: torch.Tensor | None = None) -> torch.Tensor | None:
        """Logits [B, 1, V] of a decode step on `cache`, or None where this is not one (the caller runs `lm`):
        one embedding a row, all rows at the same length; `attention_mask` [B, length + 1] and `position_ids`
        [B, 1]: the engine batch's left-padded rows (both or neither)."""
        if embeds.shape[1] != 1 or not bucketed(cache) or (attention_mask is None) != (position_ids is None):
            return None
        layers: list[BucketLayer] = cache.layers
        length = layers[0].length
        if embeds.shape[0] != layers[0].key_buffer.shape[0] or any(layer.length != length for layer in layers):
            return None
        padded = attention_mask is not None
        if padded and (attention_mask.dim() != 2 or tuple(attention_mask.shape) != (embeds.shape[0], length + 1)
                       or tuple(position_ids.shape) != (embeds.shape[0], 1)):
            return None
        if not padded and self.fused is not None and embeds.shape[0] <= self.fused_rows and embeds.dtype == torch.bfloat16:
            if length + 1 > layers[0].key_buffer.shape[2]:  # every layer's buffers are grown alike
                for layer in layers:
                    layer.reserve(length + 1)
            logits = fused.step(self.fused, embeds.contiguous(), length, [l.key_buffer for l in layers],
                                [l.value_buffer for l in layers])
        else:
            for layer in layers:
                layer.reserve(length + 1)
                for buffer in (layer.key_buffer, layer.value_buffer):
                    mark_dynamic(buffer, 2)  # one compiled graph for every bucket length
            logits = self._graph_step(embeds, length, [l.key_buffer for l in layers], [l.value_buffer for l in layers],
                                      attention_mask, position_ids)
        for layer in layers:
            layer.length = length + 1
        self.steps += 1
        return logits
