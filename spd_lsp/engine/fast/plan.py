"""The fast path as one declared plan: which layout and kernel serve each projection, for each size of forward, and
which engine runs each kind of forward. Resolved once at load (`resolve`) from the model's weights (`ModelFacts`),
where it runs (`Target`: the device, the CPU's profile) and the `kernels` setting (what to leave out); `spd.status`
shows it as it is (`FastPlan.status`).

The plan is what serves once the kernel library is loaded (built off the load, `engine/kernels/build.py`); until
then, or where it cannot be built, torch's own kernels serve (`FastPlan.without_library`).

Forward sizes (rows x tokens of one forward) fall in three tiers: `decode` (a decode step's few rows: weights read once,
matvec kernels), `batch` (verification's trees and engine batches: AMX's tiles where there are some) and `prefill`
(longer: float matmuls).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from spd_lsp.engine.cpu import CpuProfile

# What the `kernels` setting may leave out, and what serves instead.
KERNELS: dict[str, str] = {
    "compile": "the step graphs compiled by inductor (left out: steps run eager)",
    "attention": "our decode-step attention (left out: SDPA)",
    "prompt-attention": "our causal attention for prompts and trees (left out: SDPA)",
    "pointwise": "our fused norms, rotary and SiLU in eager forwards (left out: torch's ops)",
    "matvec": "our matvec kernels on the GGUF's blocks for decode steps (left out: ATen's int4 and int8 kernels)",
    "fused-step": "the whole plain decode step in one C++ call (left out: the step graph)",
    "amx": "AMX's tiles for trees and batches on the GGUF's blocks, and in prompt attention (left out: float weights)",
    "packed-weights": "float weights in oneDNN's blocked layout (left out: plain float weights)",
    "tiles": "the GGUF's blocks dequantised a tile at a time into a matmul, for trees and prefill (left out: torch's "
             "ops on slices of them)",
    "int8": "integer dot products on the GGUF's blocks for trees and batches (AVX-512 VNNI; left out: a small "
            "model's bf16 copy, else the matvec kernels)",
}
# GGUF layouts the tuned AVX-512 BF16 kernels take as they are (`matvec.cpp`: 4-bit codes with an fp16 scale and
# minimum a group of 32, or 8-bit codes with an fp16 scale a group of 32); the others run the portable kernels.
TUNED_LAYOUTS = frozenset({"q4_0", "q4_1", "q8_0", "q5_0", "iq4_nl"})
# Those AMX's tiles take (`amx.cpp`: Q4_1-like rows, Q8_0 blocks).
AMX_LAYOUTS = frozenset({"q4_0", "q4_1", "q8_0"})
FLOAT_LAYOUTS = frozenset({"f32", "f16", "bf16", "float"})
# Where the CPU has integer dot products beside AVX-512 BF16 (VNNI) and no AMX, a model of blocks runs its layers'
# trees and batches on them (`blocks_int8`: x quantised to int8 a call, as llama.cpp does), its prefill on tiles (fp32
# there: `blocks.cpp`), and keeps no bf16 copy: the bundled model's projections at 8 / 22 rows took 15 / 52 ms on int8
# x against the copy's 25 / 53 (`bench/bench_tiers.py`, 2 threads), its layers at 512 rows 468 ms on tiles against the
# copy's 665 (measured on an Intel Xeon without AMX only: CHANGELOG). Elsewhere (no VNNI), a model of blocks keeps a
# bf16 copy of its layers' projections for trees and prefill (oneDNN-blocked, on a CPU without AMX) where the copy is
# at most this big: on the bundled model (a 212 MB copy) its 121 projections at 25 rows (a
# verification tree) took 22 ms against 53 ms dequantised a tile at a time, at 512 rows 394 against 533 ms (1 thread,
# docs/performance-step.md); a 1.7B model's copy (3.2 GB) would not fit beside it, so those dequantise.
FLOAT_COPY_MAX = 300_000_000
ROLES = ("qkv", "out", "gate_up", "down", "head")
# Rows x tokens of a decode-tier forward on the matvec kernels (docs/performance-step.md: one row's step 19 ms int4
# against 41 ms bf16, 8 rows 44 against 53; a 96-token prefill chunk 3.0 s int4 against 0.35 s bf16).
DECODE_ROWS = 8
# With AMX: from 3 rows on the tiles beat the matvec kernel; up to 96 they beat the bf16 weights (`bench_amx`: the 120
# projections at 64 / 96 / 128 rows 21.1 / 28.5 / 37.4 ms against the bf16 weights' 28.0 / 32.2 / 36.0).
AMX_FIRST_ROWS = 3
AMX_LAST_ROWS = 96
# A model of blocks with no float copy, on a CPU without AMX: a verification tree's or a batch's rows up to this many
# run on the matvec kernels (a pass over the blocks every 8 rows) rather than on tiles (every weight dequantised
# into a matmul's tile at every forward): up to 32 rows they took at most as long as tiles, at 22 rows less than half
# (`bench/bench_tiers.py` on a 1.7B Q4_K_M; measured on an AMD EPYC Zen 5 and its AVX2 build, not on arm64). A small
# model's bf16 copy beats both from 16 rows on; its head, which has no copy, runs them on the matvec kernels too
# (`bench_tiers --head`: faster than tiles up to 32 rows for the bundled model's and Gemma-3-270M's heads; measured on
# an Intel Xeon without AMX only: CHANGELOG).
BATCH_MATVEC_ROWS = 32
# Where the fused step serves the plain steps (our kernels in every eager forward: norms, rotary, attention) the
# verification trees run eager too, as does a model of blocks too large for a bf16 copy (`FLOAT_COPY_MAX`: its trees
# cost its weights' reads): a graph of them verified no faster and cost memory and minutes of background compile
# (measured on an AMD EPYC Zen 5: CHANGELOG; not re-measured on a CPU with AMX).


@dataclass(frozen=True)
class Target:
    """Where the model runs: the device, the weights' dtype, and the CPU's profile (None off the CPU)."""

    device: str  # "cpu", "cuda", "mps"
    dtype: str  # "bfloat16", "float32", ...
    cpu: CpuProfile | None = None
    onednn_bf16: bool = True  # torch's oneDNN runs bf16 matmuls here (the packed float weights need it)


@dataclass(frozen=True)
class ModelFacts:
    """What of the model the plan depends on."""

    family: str
    head_dim: int
    layouts: dict[str, str]  # role -> how the model holds it: "q4_1" (the GGUF's blocks), "int4" (quantised), "float"
    head: str  # "q8_0" (the GGUF's blocks), "int8" (rows requantised), "float"
    blocks_exact: bool = True  # the blocks are the float weights' own numbers (so AMX may replace the float weights)
    biases_outside_qkv: bool = False
    shared_float_weights: bool = False  # transformers' own forward reads the float weights too (they stay as they are)
    # The model holds the GGUF's blocks and no float copy (`gguf_model.py`): `layouts` are the file's types ("q4_k",
    # "q4_k+q6_k" where layers or parts differ, "f32" ...), and every tier computes from them.
    from_blocks: bool = False
    float_copy_bytes: int = 0  # a model of blocks: what a bf16 copy of its layers' projections would hold


@dataclass(frozen=True)
class Tiers:
    """The forward sizes (rows x tokens) of each tier: decode up to `decode_rows`, batch up to `batch_rows`, prefill
    above."""

    decode_rows: int = DECODE_ROWS
    batch_rows: int = DECODE_ROWS

    def of(self, width: int) -> str:
        return "decode" if width <= self.decode_rows else "batch" if width <= self.batch_rows else "prefill"


@dataclass(frozen=True)
class Choice:
    """How one tier computes a projection: the weight's layout and the kernel on it."""

    layout: str  # "q4_1", "q8_0", "int8 rows", "int4 (ATen-packed)", "q8_0 (two int4 halves)", "bfloat16", ...
    kernel: str  # "matvec", "amx", "aten", "tinygemm", "onednn", "torch"

    def __str__(self) -> str:
        return f"{self.layout} on {self.kernel}"


@dataclass(frozen=True)
class RolePlan:
    """One role's projections (every layer's, or the head): how each tier computes them."""

    role: str
    decode: Choice
    batch: Choice
    prefill: Choice

    def status(self) -> dict[str, str]:
        return {"decode": str(self.decode), "batch": str(self.batch), "prefill": str(self.prefill)}


@dataclass(frozen=True)
class FastPlan:
    target: Target
    left_out: tuple[str, ...]
    roles: tuple[RolePlan, ...]
    tiers: Tiers
    step: str  # plain decode steps: "fused", "compiled" or "eager"
    padded_step: str  # an engine batch's left-padded rows: "compiled" or "eager"
    tree_step: str  # verification's trees: "compiled" or "eager"
    attention: str  # decode steps' attention: "ours" or "sdpa"
    prompt_attention: str  # prompts' and trees' attention: "ours", "ours with amx" or "sdpa"
    pointwise: str  # eager forwards' norms, rotary, SiLU: "ours" or "torch"
    library: bool  # the plan uses our kernel library (it is built off the load)
    facts: ModelFacts
    compile: bool  # the step graphs may be compiled (the setting; "compile" left out or not)
    why: dict[str, str] = field(default_factory=dict)  # what the plan does not use, and why

    def role(self, name: str) -> RolePlan:
        return next(r for r in self.roles if r.role == name)

    @property
    def fused_rows(self) -> int:
        """The most rows a plain step the fused step takes (the decode tier)."""
        return self.tiers.decode_rows if self.step == "fused" else 0

    def without_library(self, reason: str) -> "FastPlan":
        """The plan where our kernel library is not loaded (not yet, or its build failed: `reason`)."""
        if not self.library:
            return self
        return resolve_facts(self.facts, self.target, left_out=self.left_out, compile=self.compile, library=reason)

    def with_facts(self, **changes: Any) -> "FastPlan":
        """The plan for the same target and setting had the model these facts (`ModelFacts` fields) instead."""
        return resolve_facts(replace(self.facts, **changes), self.target, left_out=self.left_out, compile=self.compile)

    def status(self) -> dict[str, Any]:
        """What `spd.status` shows (`fastPlan`)."""
        return {
            "isa": self.target.cpu.isa if self.target.cpu is not None else self.target.device,
            "device": self.target.device, "dtype": self.target.dtype,
            "leftOut": list(self.left_out),
            "projections": {r.role: r.status() for r in self.roles},
            "tiers": {"decode": [1, self.tiers.decode_rows],
                      "batch": [self.tiers.decode_rows + 1, self.tiers.batch_rows] if self.tiers.batch_rows > self.tiers.decode_rows else None,
                      "prefill": [self.tiers.batch_rows + 1, None]},
            "engines": {"step": self.step, "paddedStep": self.padded_step, "treeStep": self.tree_step,
                        "prefill": "eager"},
            "attention": {"decode": self.attention, "prompt": self.prompt_attention},
            "pointwise": self.pointwise,
            "why": dict(self.why),
        }


def left_out_of(setting: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """The `kernels` setting ("auto", or the names of `KERNELS` to leave out) as what is left out; ValueError names an
    unknown one."""
    if setting in (None, "auto"):
        return ()
    names = (setting,) if isinstance(setting, str) else tuple(setting)
    unknown = [name for name in names if name not in KERNELS]
    if unknown:
        raise ValueError(f"kernels: unknown {', '.join(map(repr, unknown))} (one of {', '.join(KERNELS)})")
    return tuple(sorted(set(names)))


def resolve(facts: ModelFacts, target: Target, *, left_out: tuple[str, ...] = (), compile: bool = True) -> FastPlan:
    """The plan for a model of `facts` on `target`, leaving out `left_out` (`left_out_of`)."""
    return resolve_facts(facts, target, left_out=left_out, compile=compile)


def resolve_facts(facts: ModelFacts, target: Target, *, left_out: tuple[str, ...], compile: bool,
                  library: str | None = None) -> FastPlan:
    """`resolve`; `library`: why the kernel library is not there (None: it is, or will be, where it is wanted)."""
    why: dict[str, str] = {}
    cpu = target.cpu if target.device == "cpu" else None
    bf16 = target.dtype == "bfloat16"

    def usable(name: str, *conditions: tuple[bool, str]) -> bool:
        """Kernel group `name` serves: not left out, the library there, and every (condition, why not) holds."""
        if name in left_out:
            why[name] = "left out by the kernels setting"
            return False
        if target.device != "cpu":
            why[name] = f"a CPU kernel ({target.device} runs torch's)"
            return False
        if library is not None and name not in ("compile", "packed-weights"):
            why[name] = f"kernel library not loaded: {library}"
            return False
        for holds, reason in conditions:
            if not holds:
                why[name] = reason
                return False
        return True

    no_bf16_dot = (cpu is not None and cpu.bf16_dot, f"no AVX-512 BF16 ({cpu.isa if cpu else target.device})")
    bf16_only = (bf16, f"{target.dtype} weights (the kernels run bf16)")
    # the tuned matvec kernels (the module path's only ones); a model of blocks takes the portable ones otherwise
    matvec = usable("matvec", bf16_only, no_bf16_dot) if not facts.from_blocks else False
    amx_projections = all(facts.layouts[r] in ("q4_1", "int4") for r in ROLES[:-1]) or (
        facts.from_blocks and all(facts.layouts[r] in AMX_LAYOUTS for r in ROLES[:-1]))
    amx = usable("amx", bf16_only, (cpu is not None and cpu.amx, f"no AMX tiles ({cpu.isa if cpu else '-'})"),
                 (facts.blocks_exact, "blocks not the float weights' own numbers (int4 quantised from them)"),
                 (amx_projections or facts.head == "q8_0", "no Q4_1 or Q8_0 blocks"))
    packed = usable("packed-weights", bf16_only,
                    (cpu is not None and not cpu.amx, "AMX's bf16 matmuls need no packing"),
                    (target.onednn_bf16, "no oneDNN bf16 here"),
                    (not facts.shared_float_weights, "transformers' forward reads the float weights as they are"))
    dense = Choice(target.dtype, "onednn") if packed else Choice(target.dtype, "torch")
    plain = Choice(target.dtype, "torch")
    aten = Choice("int4 (ATen-packed)", "tinygemm" if target.device == "cuda" else "aten")

    if facts.from_blocks:
        int8 = usable("int8", bf16_only,
                      (cpu is not None and cpu.int8_dot, f"no AVX-512 VNNI ({cpu.isa if cpu else '-'})"),
                      (not (cpu is not None and cpu.amx), "AMX's tiles serve trees and prefill"))
        copy = packed and facts.float_copy_bytes <= FLOAT_COPY_MAX and not int8
        if packed and int8:
            why["packed-weights"] = ("trees run on the blocks' integer dot products, prefill on tiles of them (no bf16 "
                                     "copy kept)")
        elif packed and not copy:
            why["packed-weights"] = (f"a bf16 copy of the blocks would hold {facts.float_copy_bytes / 1e6:,.0f} MB "
                                     f"(kept up to {FLOAT_COPY_MAX / 1e6:,.0f} MB)")
        roles = _roles_from_blocks(facts, target, usable=usable, copy=copy, int8=int8, plain=plain)
    else:
        roles = _roles_of_module(facts, target, matvec=matvec, amx=amx, amx_projections=amx_projections,
                                 dense=dense, plain=plain, aten=aten)
    amx_batch = any(r.batch.kernel == "amx" for r in roles)
    matvec_batch = any(r.batch.kernel in ("matvec", "int8") for r in roles)
    tiers = (Tiers(decode_rows=AMX_FIRST_ROWS - 1, batch_rows=AMX_LAST_ROWS) if amx_batch else
             Tiers(batch_rows=BATCH_MATVEC_ROWS) if matvec_batch else Tiers())

    graphs = compile and "compile" not in left_out
    if not compile or "compile" in left_out:
        why.setdefault("compile", "left out by the kernels setting" if "compile" in left_out else "compile off")
    fused = usable("fused-step", bf16_only, no_bf16_dot,
                   (facts.family in ("llama", "qwen2", "qwen3", "gemma3_text"), f"family {facts.family}"),
                   (facts.head_dim in (64, 128, 256), f"a head size of {facts.head_dim}"),
                   (all(r.decode.kernel == "matvec" for r in roles[:-1]), "projections not on the matvec kernels"),
                   (roles[-1].decode.kernel == "matvec", "a head not on the matvec kernels"),
                   (not facts.biases_outside_qkv, "biases outside q/k/v"))
    large = facts.from_blocks and facts.float_copy_bytes > FLOAT_COPY_MAX
    if graphs and large:
        why["tree-compile"] = (f"a model this large (a bf16 copy of its projections: {facts.float_copy_bytes / 1e6:,.0f} "
                               "MB) runs its trees eager: their cost is its weights' reads")
    elif graphs and fused:
        why["tree-compile"] = "trees run eager beside the fused step: a graph of them saved nothing (plan.py)"
    attention = "ours" if usable("attention", (target.dtype in ("bfloat16", "float32"), f"{target.dtype}")) else "sdpa"
    prompt = usable("prompt-attention", bf16_only, no_bf16_dot,
                    (facts.head_dim in (64, 128), f"a head size of {facts.head_dim}"))
    prompt_attention = ("ours with amx" if prompt and amx and facts.head_dim == 64 else "ours") if prompt else "sdpa"
    pointwise = "ours" if usable("pointwise", bf16_only) else "torch"
    uses_library = target.device == "cpu" and library is None and (
        matvec or amx or fused or attention == "ours" or prompt or pointwise == "ours")
    plan = FastPlan(target=target, left_out=left_out, roles=tuple(roles), tiers=tiers,
                    step="fused" if fused else "compiled" if graphs else "eager",
                    padded_step="compiled" if graphs else "eager",
                    tree_step="compiled" if graphs and "tree-compile" not in why else "eager",
                    attention=attention, prompt_attention=prompt_attention, pointwise=pointwise,
                    library=uses_library, facts=facts, compile=compile, why=why)
    return plan


def _roles_of_module(facts: ModelFacts, target: Target, *, matvec: bool, amx: bool, amx_projections: bool,
                     dense: Choice, plain: Choice, aten: Choice) -> list[RolePlan]:
    """A transformers (or light) model's float weights, with the decode-tier layouts its loader made beside them."""
    roles = []
    for role in ROLES:
        layout = facts.layouts[role] if role != "head" else facts.head
        if layout in ("q4_1", "int4") and matvec:
            decode = Choice("q4_1", "matvec")
        elif layout in ("q4_1", "int4") and target.device in ("cpu", "cuda"):
            decode = aten
        elif layout == "q8_0" and matvec:
            decode = Choice("q8_0", "matvec")
        elif layout == "q8_0" and target.device == "cpu":
            decode = Choice("q8_0 (two int4 halves)", "aten")
        elif layout in ("q8_0", "int8") and target.device == "cpu":
            decode = Choice("int8 rows", "matvec" if matvec else "aten")
        else:
            decode = dense if role != "head" else plain
        batch = dense if role != "head" else plain
        if amx and role != "head" and amx_projections:
            batch = Choice("q4_1", "amx")
        elif amx and role == "head" and layout == "q8_0":
            batch = Choice("q8_0", "amx")
        roles.append(RolePlan(role, decode, batch, dense if role != "head" else plain))
    return roles


def _roles_from_blocks(facts: ModelFacts, target: Target, *, usable: Any, copy: bool, int8: bool, plain: Choice
                       ) -> list[RolePlan]:
    """A model of the GGUF's blocks: decode on the matvec kernels (the tuned ones where the layout and CPU take them),
    trees and prefill on AMX's tiles (Q4_0/Q4_1/Q8_0 on a CPU with AMX), trees on integer dot products and prefill on
    tiles where `int8` (VNNI, no AMX), on a bf16 copy in oneDNN's layout where `copy` (a small model on a CPU without
    either: `FLOAT_COPY_MAX`), else trees on the matvec kernels (no AMX: `BATCH_MATVEC_ROWS`) and prefill dequantised
    a tile at a time into a matmul; torch's ops on slices of the blocks where our library is not loaded."""
    library = usable("matvec")
    tiles = usable("tiles")
    amx = usable("amx", (target.dtype == "bfloat16", "the kernels run bf16"),
                 (target.cpu is not None and target.cpu.amx, "no AMX tiles"))
    roles = []
    for role in ROLES:
        layout = facts.layouts[role] if role != "head" else facts.head
        if layout in FLOAT_LAYOUTS:
            roles.append(RolePlan(role, plain, plain, plain))
            continue
        decode = Choice(layout, "matvec") if library else Choice(layout, "torch")
        wide = Choice(f"{layout} (bf16 copy)", "onednn") if copy else Choice(layout, "tiles") if tiles else \
            Choice(layout, "torch")
        if role == "head":  # the head's trees run few rows of a wide matrix: a copy of it would cost more than it saves
            wide = Choice(layout, "tiles") if tiles else Choice(layout, "torch")
        # Without AMX a tree's rows go to the matvec kernels (`BATCH_MATVEC_ROWS`), but where the layers' bf16 copy
        # serves them (a small model): the head has no copy, so it takes the matvec kernels there too.
        no_amx = not (target.cpu is not None and target.cpu.amx)
        few_rows = decode if library and no_amx and (not copy or role == "head") else wide
        # int8 x serves the layers' trees and batches only: a prompt's (its cache's numbers) and the head's logits
        # keep bf16 x (int8 x there moved top drafts: CHANGELOG)
        if int8 and role != "head":
            few_rows = Choice(layout, "int8")
        batch = Choice(layout, "amx") if amx and layout in AMX_LAYOUTS else few_rows
        roles.append(RolePlan(role, decode, batch, wide))
    return roles
