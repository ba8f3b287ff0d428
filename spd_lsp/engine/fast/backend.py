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
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from transformers import DynamicCache

from spd_lsp.api import Cancelled
from spd_lsp.engine.decoding.threads import lower_priority, niced
from spd_lsp.engine.fast import fused
from spd_lsp.engine.fast.cache import BucketLayer, bucket_cache, bucketed
from spd_lsp.engine.fast.compile import Compiled, mark_dynamic
from spd_lsp.engine.fast.layouts import Linear
from spd_lsp.engine.fast.gguf_model import BlockEmbedding, Joined
from spd_lsp.engine.fast.layouts.blocks import Blocks, Int8Rows, Q4Rows, Q8Blocks, blocks_of_q4, blocks_of_q8
from spd_lsp.engine.fast.layouts.dense import FLOAT_COPY_BUDGET, BlocksTorch, Dense, PackedDense, float_copy_bytes
from spd_lsp.engine.fast.layouts.ours import (BlocksInt8, BlocksMatvec, BlocksTiles, Int8Matvec, Q4Amx, Q4Matvec, Q8Amx,
                                              Q8Matvec)
from spd_lsp.engine.fast.masks import Upto
from spd_lsp.engine.fast.model import FastLM, Projection, Write
from spd_lsp.engine.fast.plan import Choice, FastPlan
from spd_lsp.engine.kernels import build as kernel_library
from spd_lsp.engine.memory import give_back

log = logging.getLogger(__name__)


# On the CPU a verification tree runs at its own width (one graph, the width dynamic: a 16-node tree padded to 32 ran
# twice its tokens; docs/performance-step.md, round 10); at most the widest of these. Elsewhere (CUDA graphs record
# fixed shapes) the widths a tree is padded to (a compiled graph each, ~45 MB of RSS: 16 and 32 took +92 MB): the
# shipped k = 3 drafts of at most 10 tokens make at most 27 nodes (a draft's last token is not run), so one graph
# serves them; k > 3 may need the second. Wider trees run eager. A request's verification took 53.1 ms against
# 64.9 eager (bundled model, 2 cores, load 3.3; 45 against 53 ms a 30-node tree alone, load ~1.5).
TREE_WIDTHS = (32, 64)
BUILD_NICE = 19  # the kernel library's build (a first start's): requests keep the CPU
WAIT_POLL_S = 0.05  # how often a forward waiting for the kernel library checks whether its request was cancelled
_early_build = threading.Lock()  # taken by the first `build_library_early`


def build_library_early() -> None:
    """The kernel library built (or loaded) in a thread of its own at BUILD_NICE from the start of a model's load,
    where it is not built yet, so that the build and the load overlap (a first start waits for both); the backend's
    `prepare` then waits for that build (`kernel_library.build` runs once a process)."""
    if kernel_library.built() or not _early_build.acquire(blocking=False):
        return

    def build() -> None:
        lower_priority(BUILD_NICE)
        kernel_library.build()

    threading.Thread(target=build, name="spd-kernel-build", daemon=True).start()

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


def held_blocks(linear: Linear) -> Blocks | list | None:
    """The GGUF's blocks a `Linear` computes from (a list for `Joined` parts), or None (float weights)."""
    if isinstance(linear, Joined):
        parts = [held_blocks(part) for part in linear.parts]
        return None if any(part is None for part in parts) else parts
    weights = getattr(linear, "weights", None)
    if isinstance(weights, Blocks):
        return weights
    if isinstance(linear, (Q4Matvec, Q4Amx)):
        return blocks_of_q4(linear.rows, linear.layout)
    if isinstance(linear, (Q8Matvec, Q8Amx)):
        return blocks_of_q8(linear.blocks, linear.layout)
    return None


def on_blocks(held: Blocks | list, choice: Choice, *, bf16_dot: bool) -> Linear:
    """The `Linear` computing `held` (blocks, or a `Joined` projection's parts) as `choice` says: the tuned AVX-512
    BF16 kernels where they take the layout, the portable ones otherwise."""
    if choice.kernel == "onednn":  # a bf16 copy (a small model's trees and prefill: `plan.FLOAT_COPY_MAX`)
        parts = held if isinstance(held, list) else [held]
        copy = PackedDense(torch.cat([part.dequantised().to(torch.bfloat16) for part in parts]))
        copy.layout = choice.layout
        return copy
    if isinstance(held, list):
        return Joined([on_blocks(part, choice, bf16_dot=bf16_dot) for part in held])
    tuned_q8 = held.kind == "q8" and held.group == 32 and len(held.parts) == 2
    if choice.kernel == "matvec":
        if bf16_dot and held.kind == "q4":
            return Q4Matvec(Q4Rows(*held.parts), layout=held.layout)
        if bf16_dot and tuned_q8:
            return Q8Matvec(Q8Blocks(*held.parts), layout=held.layout)
        return BlocksMatvec(held)
    if choice.kernel == "amx" and held.kind == "q4":
        return Q4Amx(Q4Rows(*held.parts), layout=held.layout)
    if choice.kernel == "amx" and tuned_q8:
        return Q8Amx(Q8Blocks(*held.parts), layout=held.layout)
    if choice.kernel == "tiles":
        return BlocksTiles(held)
    if choice.kernel == "int8":
        return BlocksInt8(held)
    if choice.kernel == "torch":
        return BlocksTorch(held)
    raise ValueError(f"the plan asks for {choice} of {held.layout} blocks")


@dataclass
class Sources:
    """Where the full plan's weights come from, read when it is applied (in the compile thread): the projections'
    Q4_1 rows (per layer, by fused name), the head's Q8_0 blocks, the head's int8 rows; None where the model has none."""

    rows: Callable[[], list[dict[str, Q4Rows]] | None] | None = None
    head_blocks: Callable[[], Q8Blocks | None] | None = None
    int8_rows: Callable[[], Int8Rows | None] | None = None


class FastBackend:
    def __init__(self, lm: FastLM, *, plan: FastPlan, sources: Sources | None = None) -> None:
        self.lm = lm
        self.plan = plan
        self.sources = sources or Sources()
        self.device = lm.device
        self._preparing = threading.Lock()
        self.applied = False  # `prepare` ran (the plan, or the plan without the library, serves)
        self.prepared = threading.Event()  # set with `applied`
        # A model of blocks too big for torch's kernels to keep a float copy of (`FLOAT_COPY_BUDGET`) runs them on
        # slices of its weights dequantised at every call until the library loads: a 1.7B Q4_K_M's warm-up took 21 s
        # so, and its requests outlived their 30 s while they took the CPU from the build (first drafts after 100 s).
        # Its forwards wait for the library instead (`wait_for_plan`).
        self.waits_for_library = (plan.library and plan.facts.from_blocks
                                  and plan.facts.float_copy_bytes > FLOAT_COPY_BUDGET)
        lm.on_grown.append(self._tables_grown)
        self.fused: torch.ScriptObject | None = None
        # What `spd.status` shows of it: one dict, kept current as the plan is applied and the step compiles.
        self.info: dict[str, Any] = {"fastPath": True}
        self.serving = plan.without_library("not loaded yet")
        # "pending" (the kernel library loads before the first compile), "applied", or "without the kernel library:
        # <why>" (it could not be built: torch's kernels serve)
        self.state = "pending" if plan.library else "applied"
        self._report()
        graphs = plan.compile and "compile" not in plan.left_out
        self.step_fn = Compiled(self.step_tensors, lm.device, enabled=graphs, status=self.info,
                                inductor=CPU_INDUCTOR, before_compile=self.prepare, served_otherwise=self.fused_serves)
        # The engine batch's left-padded rows (positions and padding per row): a graph of their own.
        self.info["paddedStep"] = {}
        self.padded_fn = Compiled(self.padded_step_tensors, lm.device, enabled=graphs,
                                  status=self.info["paddedStep"], inductor=CPU_INDUCTOR, before_compile=self.prepare)
        self.info["treeStep"] = {}
        # Verification's trees at their own width on the CPU (`tree`); padded to TREE_WIDTHS where graphs are recorded.
        self.exact_width = lm.device.type == "cpu"
        self.tree_fn = Compiled(self.tree_tensors, lm.device, enabled=graphs and plan.tree_step == "compiled",
                                status=self.info["treeStep"], inductor=CPU_INDUCTOR, before_compile=self.prepare,
                                off_reason=plan.why.get("tree-compile", "compile off"))
        self.steps = 0
        self.trees = 0  # verification trees run through `tree`

    @property
    def weights(self) -> str:
        """One line of what serves decode steps now (the log's)."""
        lm = self.lm
        return ", ".join(f"{role} {projection.decode.name}" for role, projection in
                         zip(("qkv", "out", "gate_up", "down", "head"), (*lm.projections()[:4], lm.output)))

    def _report(self) -> None:
        lm = self.lm
        self.info.update(
            fastPlan=self.plan.status(),
            # what serves now: the plan once its kernels are loaded, else the plan without them (and why)
            fastPlanState=self.state,
            waitsForLibrary=self.waits_for_library and not self.applied,
            serving={role: {tier: projection.linear(tier).name for tier in ("decode", "batch", "prefill")}
                     for role, projection in zip(("qkv", "out", "gate_up", "down", "head"),
                                                 (*lm.projections()[:4], lm.output))},
            weightMegabytes={tier: round(lm.weight_bytes(tier) / 1e6, 1) for tier in ("decode", "batch", "prefill")},
            floatCopyMegabytes=round((float_copy_bytes() + sum(
                linear.nbytes() for p in lm.projections() for linear in set(p.linears()) if isinstance(linear, PackedDense)
            )) / 1e6, 1),
            residentWeightMegabytes=round(lm.resident_bytes() / 1e6, 1))

    def start(self) -> None:
        """After the load: the plan applied now where our kernel library is built already (loading it takes ~1 s), else
        in a thread of its own while it builds (minutes on a first start; requests run the plan without it meanwhile).
        A compile waits for it either way (`prepare`)."""
        if self.plan.library and not kernel_library.built():
            threading.Thread(target=self.prepare, name="spd-prepare", daemon=True).start()
        else:
            self.prepare()

    def prepare(self) -> None:
        """Before a graph's compile, in the thread that compiles it (or once by the engine's warm-up where nothing
        compiles), once: the kernel library built (or loaded) where the plan uses it, then the plan applied (`apply`)
        — or the plan without the library, where it could not be built. A graph is never traced before this."""
        with self._preparing:
            if self.applied:
                return
            plan = self.plan
            if plan.library and not self._library():
                plan = plan.without_library(kernel_library.reason() or "not built")
                self.state = f"without the kernel library: {kernel_library.reason()}"
            else:
                self.state = "applied"
            self.apply(plan)
            self.applied = True
            self.prepared.set()
            self._report()
            give_back()  # the float copies and layouts the plan left

    def wait_for_plan(self, cancelled: Callable[[], bool]) -> None:
        """Where forwards wait for the kernel library (`waits_for_library`): until `prepare` has run (the plan, or the
        plan without the library where it could not be built, serves), or `cancelled()` (raises `Cancelled`)."""
        while self.waits_for_library and not self.prepared.wait(WAIT_POLL_S):
            if cancelled():
                raise Cancelled()

    @staticmethod
    def _library() -> bool:
        """The kernel library loaded; a build (minutes on a first start: the compiler on every core) runs at the
        lowest priority, so the requests served meanwhile keep the CPU."""
        if kernel_library.built():
            return kernel_library.build()
        return niced(kernel_library.build, nice=BUILD_NICE, name="spd-kernel-build")

    def apply(self, plan: FastPlan) -> None:
        """Every projection's tiers onto `plan`'s layouts and kernels, the tiers' bounds, the attention and pointwise
        kernels, the fused step. Safe while forwards run in another thread: each projection's tier is replaced by one
        assignment, the float weights dropped only after every tier left them."""
        started = time.perf_counter()
        lm = self.lm
        rows = self.sources.rows() if self.sources.rows is not None and any(
            r.decode == Choice("q4_1", "matvec") or r.batch.kernel == "amx" for r in plan.roles[:-1]) else None
        head_blocks = self.sources.head_blocks() if self.sources.head_blocks is not None else None
        for index, block in enumerate(lm.blocks):
            for role, projection in (("qkv", block.qkv), ("out", block.out), ("gate_up", block.gate_up),
                                     ("down", block.down)):
                self._place(projection, plan.role(role), rows[index][role] if rows is not None else None, None)
        self._place(lm.output, plan.role("head"), None, head_blocks)
        if all(not isinstance(linear, Dense) for p in lm.projections()[:-1] for linear in p.linears()):
            lm.release_float_weights()
        lm.tiers = plan.tiers
        if isinstance(lm.embedding, BlockEmbedding):
            lm.embedding.kernel = plan.library  # its rows looked up on our kernel
        lm.prompt_kernel = plan.prompt_attention if plan.prompt_attention != "sdpa" else None
        lm.pointwise = plan.pointwise == "ours"
        if plan.step == "fused":
            self.fused = fused.build(lm)
        self.serving = plan
        if self.fused is not None:
            self.step_fn.served_elsewhere(self.fused_reason)
        self.sources = Sources()  # read once
        log.info("fast plan applied in %.2f s: %s", time.perf_counter() - started, self.weights)

    def _tables_grown(self) -> None:
        """The rotary tables grew (a longer context): the fused step, which holds them, made again on the new ones."""
        if self.fused is not None:
            self.fused = fused.build(self.lm)

    def _place(self, projection: Projection, role: Any, rows: Q4Rows | None, blocks: Q8Blocks | None) -> None:
        """One projection's tiers as `role` (a `RolePlan`) says, from the weights given (`rows`, `blocks`) or the
        GGUF's blocks it holds (a model read from them)."""
        made: dict[Choice, Linear] = {}
        held = held_blocks(projection.prefill)

        def linear(choice: Choice, current: Linear) -> Linear:
            if current.layout == choice.layout and current.kernel == choice.kernel:
                return current
            if choice not in made:
                made[choice] = (on_blocks(held, choice, bf16_dot=self._bf16_dot) if held is not None else
                                self._linear(choice, projection, rows, blocks, current))
            return made[choice]

        projection.decode = linear(role.decode, projection.decode)
        projection.batch = linear(role.batch, projection.batch)
        projection.prefill = linear(role.prefill, projection.prefill)

    def _linear(self, choice: Choice, projection: Projection, rows: Q4Rows | None, blocks: Q8Blocks | None,
                current: Linear) -> Linear:
        dense = next((l for l in projection.linears() if isinstance(l, Dense)), None)
        packed = next((l for l in projection.linears() if isinstance(l, PackedDense)), None)
        if choice == Choice("q4_1", "matvec") and rows is not None:
            return Q4Matvec(rows)
        if choice == Choice("q4_1", "amx") and rows is not None:
            return Q4Amx(rows)
        if choice == Choice("q8_0", "matvec") and blocks is not None:
            return Q8Matvec(blocks)
        if choice == Choice("q8_0", "amx") and blocks is not None:
            return Q8Amx(blocks)
        if choice == Choice("int8 rows", "matvec"):
            held = getattr(current, "rows", None)
            int8 = held if isinstance(held, Int8Rows) else self.sources.int8_rows() if self.sources.int8_rows else None
            if int8 is not None:
                return Int8Matvec(int8)
        if choice.kernel == "onednn" and dense is not None:
            return packed or PackedDense(dense.weight)
        if choice.kernel == "torch" and dense is not None:
            return dense
        raise ValueError(f"the plan asks for {choice} and the model has no weights for it")

    @property
    def _bf16_dot(self) -> bool:
        cpu = self.plan.target.cpu
        return cpu is not None and cpu.bf16_dot and self.lm.dtype == torch.bfloat16

    @property
    def fused_rows(self) -> int:
        """The most rows a plain step the fused step takes."""
        return self.serving.fused_rows if self.fused is not None else 0

    @property
    def fused_reason(self) -> str:
        return f"the fused step serves plain steps of up to {self.fused_rows} rows"

    def fused_serves(self, args: tuple[Any, ...]) -> str | None:
        """`step_fn`'s `served_otherwise`: why a plain step shaped as `args` needs no graph (the fused step takes it)."""
        if self.fused is not None and args[0].shape[0] <= self.fused_rows:
            return self.fused_reason
        return None

    @property
    def kernel(self) -> bool:
        """Decode steps attend on our kernel (`Upto` masks): read by `step_tensors`, a guard of its graph, so set
        before the step's first compile (`prepare`)."""
        return self.serving.attention == "ours"

    def new_cache(self) -> DynamicCache:
        return bucket_cache(self.lm.layers)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.lm(*args, **kwargs)

    def step_tensors(self, x: torch.Tensor, column: torch.Tensor, keys: list[torch.Tensor],
                     values: list[torch.Tensor]) -> torch.Tensor:
        """Logits [B, 1, V] of inputs x [B, 1, H] at position `column` [1] of every row, written there into `keys`/`values`
        (per layer [B, kv heads, bucket, D]); what it attends to: the columns up to `column`."""
        if self.kernel:  # the kernel reads columns 0..column only: no mask
            return self._step(x, column, keys, values, column.expand(x.shape[0], 1), Upto(column))
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

        return self.lm.forward(x, positions, visible, live, columns=columns)

    @torch.inference_mode()
    def tree(self, cache: Any, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
        """Logits [B, n, V] of verification's packed trees, ids [B, n] at `positions` [B, n] under `mask`
        [B, 1, n, length + n] (additive: 0 attends), appended to `cache` as `lm` would (its length grows by n);
        through `tree_tensors`: on the CPU at its own width (one graph, the width a dynamic size), elsewhere padded to
        the next of `TREE_WIDTHS` (fixed shapes for CUDA graphs), the padding tokens at the first one's position and
        seeing what it sees of the prompt. None where this is not one (the caller runs `lm`)."""
        batch, n = ids.shape
        width = next((w for w in TREE_WIDTHS if w >= n), None)
        # A tree of the decode tier runs eager, where its projections (and the int8 head) take the
        # decode weights: padded, it would take the float ones, and answer otherwise than an engine batch's eager
        # verification of the same drafts (the Ray replicas' scores differed by 2.7e-4 from a local engine's).
        if width is None or batch * n <= self.lm.tiers.decode_rows or not bucketed(cache):
            return None
        if self.exact_width:
            width = n
        layers: list[BucketLayer] = cache.layers
        length = layers[0].length
        self.lm.reserve_positions(length + width)
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
              positions: torch.Tensor, mask: torch.Tensor | Upto) -> torch.Tensor:
        return self.lm.forward(x, positions, mask, written_at(column, keys, values), last_only=True, columns=column)

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
        self.lm.reserve_positions(length + 1)
        padded = attention_mask is not None
        if padded and (attention_mask.dim() != 2 or tuple(attention_mask.shape) != (embeds.shape[0], length + 1)
                       or tuple(position_ids.shape) != (embeds.shape[0], 1)):
            return None
        if not padded and self.fused is not None and embeds.shape[0] <= self.fused_rows and embeds.dtype == torch.bfloat16:
            if length + 1 > layers[0].key_buffer.shape[2]:  # every layer's buffers are grown alike
                for layer in layers:
                    layer.reserve(length + 1)
            logits = fused.run(self.fused, embeds.contiguous(), length, [l.key_buffer for l in layers],
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
