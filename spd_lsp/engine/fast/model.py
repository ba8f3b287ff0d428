"""Our own forward of a Llama-family decoder (Llama/SmolLM2, Qwen2), in the manner of gpt-fast's model.py.

The weights are the transformers model's own (its q/k/v and gate/up weights become views of
one fused weight each, so the float copy costs nothing extra); rotary cos/sin are tabled once.
Each projection holds one `Linear` (`layouts/`) per tier of forward size (`plan.Tiers`): decode steps
on the GGUF's blocks, verification's trees on AMX's tiles where there are some, prefill on float weights.

`forward(x, positions, mask, write)` is one pass over every layer: `write(layer, keys, values)`
stores a layer's new keys/values and returns those it attends to. The eager path (`FastLM.__call__`,
with transformers' calling convention) writes into any transformers cache; the compiled step
(`backend.py`) writes into fixed buffers with `index_copy_`, so nothing in here syncs with the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from spd_lsp.engine.decoding.grouped import MAX_QUERY, grouped_attention
from spd_lsp.engine.decoding.interrupt import checkpoint
from spd_lsp.engine.fast.layouts import Linear, unique_bytes
from spd_lsp.engine.fast.layouts.dense import Dense
from spd_lsp.engine.fast.masks import Causal, Upto
from spd_lsp.engine.fast.plan import Tiers
from spd_lsp.engine.kernels import pointwise, prompt
from spd_lsp.engine.kernels.attention import decode_attention

FAMILIES = ("llama", "qwen2")
# A prompt's last block past its keys and values runs on its last this many positions (its logits: the last one's).
# Not 1: oneDNN's packed bf16 weights gave one row another rounding than the same row among 500 (1 of 12 prompts
# off by a bf16 step); at 16 rows, 12 of 12 prompts' logits were the whole forward's, bit for bit. Above
# the decode tier, so the rows stay on the weights the rest of the prompt ran on.
PROMPT_TAIL = 16

Write = Callable[[int, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def unsupported(config: Any) -> str | None:
    """Why a model of this (transformers) config cannot run here (None: it can)."""
    family = getattr(config, "model_type", None)
    if family not in FAMILIES:
        return f"model family {family!r} (the fast path covers {', '.join(FAMILIES)})"
    rope = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
    if rope not in ("default", "linear", "llama3"):
        return f"rotary type {rope!r} (its frequencies change with the length)"
    if getattr(config, "mlp_bias", False) or getattr(config, "hidden_act", "silu") != "silu":
        return "an MLP other than a biasless SiLU-gated one"
    if family == "qwen2" and getattr(config, "use_sliding_window", False):
        return "sliding-window attention"
    return None


class Projection:
    """One projection (a layer's qkv, out, gate_up or down, or the output head): x @ W.T (+ bias), W held as one
    `Linear` per tier of forward size (`plan.Tiers`: decode, batch, prefill). All three start as the float weight
    (or what the loader gives for decode); the backend replaces them with the plan's as its kernels load, each by one
    assignment, so a forward in another thread finds the old or the new one."""

    def __init__(self, dense: Linear, bias: torch.Tensor | None, *, decode: Linear | None = None) -> None:
        self.decode: Linear = decode if decode is not None else dense
        self.batch: Linear = dense
        self.prefill: Linear = dense
        self.bias = bias

    def linear(self, tier: str) -> Linear:
        return self.decode if tier == "decode" else self.batch if tier == "batch" else self.prefill

    def forward(self, x: torch.Tensor, tier: str) -> torch.Tensor:
        out = self.linear(tier)(x)
        return out if self.bias is None else out + self.bias

    def __call__(self, x: torch.Tensor, tier: str) -> torch.Tensor:
        return self.forward(x, tier)

    def linears(self) -> tuple[Linear, ...]:
        return (self.decode, self.batch, self.prefill)


def _fused(modules: list[torch.nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One weight (and bias) of several projections along the outputs; theirs become views of it."""
    weight = torch.cat([m.weight.detach() for m in modules])
    biases = [m.bias for m in modules]
    bias = torch.cat([b.detach() for b in biases]) if all(b is not None for b in biases) else None
    start = 0
    for m in modules:
        n = m.weight.shape[0]
        m.weight = torch.nn.Parameter(weight[start : start + n], requires_grad=False)
        if bias is not None:
            m.bias = torch.nn.Parameter(bias[start : start + n], requires_grad=False)
        start += n
    return weight, bias


def _bias(module: torch.nn.Module) -> torch.Tensor | None:
    bias = getattr(module, "bias", None)
    return None if bias is None else bias.detach()


@dataclass
class Block:
    attn_norm: torch.Tensor
    qkv: Projection
    out: Projection
    mlp_norm: torch.Tensor
    gate_up: Projection
    down: Projection


@dataclass
class CausalOutput:
    logits: torch.Tensor


class FastLM(torch.nn.Module):
    """The decoder of a transformers Llama/Qwen2 causal LM, on its weights. `decode`: per layer, the `Linear` of each
    fused projection (by name: qkv, out, gate_up, down) for decode-tier forwards where the loader has one (int4 from
    the GGUF's blocks or quantised, on torch's kernels until ours load), else the float weight; `head`: likewise for
    the output projection. `tiers`: which forward sizes take which of each projection's `Linear`s."""

    def __init__(self, model: Any, decode: list[dict[str, Linear]] | None = None, *, head: Linear | None = None
                 ) -> None:
        super().__init__()
        config = model.config
        reason = unsupported(config)
        if reason:
            raise ValueError(f"the fast path does not run {reason}")
        weight = model.get_input_embeddings().weight
        self.dtype, self.device = weight.dtype, weight.device
        self.hf = [model]  # not a submodule: its weights are ours
        self.embedding = model.get_input_embeddings()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.vocab = config.vocab_size
        self.tiers = Tiers()
        self.blocks: list[Block] = []
        for index, layer in enumerate(model.model.layers):
            attn, mlp = layer.self_attn, layer.mlp
            given = decode[index] if decode else {}
            qkv, qkv_bias = _fused([attn.q_proj, attn.k_proj, attn.v_proj])
            gate_up, _ = _fused([mlp.gate_proj, mlp.up_proj])
            self.blocks.append(Block(
                attn_norm=layer.input_layernorm.weight.detach(),
                qkv=Projection(Dense(qkv), qkv_bias, decode=given.get("qkv")),
                out=Projection(Dense(attn.o_proj.weight.detach()), _bias(attn.o_proj), decode=given.get("out")),
                mlp_norm=layer.post_attention_layernorm.weight.detach(),
                gate_up=Projection(Dense(gate_up), None, decode=given.get("gate_up")),
                down=Projection(Dense(mlp.down_proj.weight.detach()), None, decode=given.get("down")),
            ))
        self.norm = model.model.norm.weight.detach()
        self.head = model.get_output_embeddings().weight.detach()
        self.output = Projection(Dense(self.head), None, decode=head)
        rotary = model.model.rotary_emb
        length = max(getattr(config, "max_position_embeddings", 0) or 0, 8192)
        freqs = torch.outer(torch.arange(length, dtype=torch.float32, device=self.device),
                            rotary.inv_freq.float().to(self.device))
        table = torch.cat([freqs, freqs], dim=-1)
        scaling = getattr(rotary, "attention_scaling", 1.0)
        self.cos, self.sin = table.cos() * scaling, table.sin() * scaling  # fp32, as transformers computes them
        # The plan's attention and pointwise kernels, once the backend loaded them: `decode_kernel` (a decode step's
        # attention, `Upto` masks), `prompt_kernel` ("ours" or "ours with amx": a prompt's and a tree's causal
        # attention), `pointwise` (the eager forward's norms, rotary and SiLU in bf16 on the CPU, never in a traced
        # graph: inductor fuses those itself).
        self.prompt_kernel: str | None = None
        self.pointwise = False

    def projections(self) -> list[Projection]:
        """Every layer's projections, then the head."""
        return [p for block in self.blocks for p in (block.qkv, block.out, block.gate_up, block.down)] + [self.output]

    def release_float_weights(self) -> None:
        """After every layer's tiers left their float weights (`Dense`) for other layouts: the transformers/light
        model's own are emptied (its forward cannot run from then on, and `fast.build` refuses it)."""
        model = self.hf[0]
        for layer in model.model.layers:  # their weights are views of the plain ones: dropped with them
            for module in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                           layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj):
                module.weight = torch.nn.Parameter(self.head.new_empty(0), requires_grad=False)
        model.spd_weights_handed_over = True

    @property
    def layers(self) -> int:
        return len(self.blocks)

    def weight_bytes(self, tier: str) -> int:
        """Bytes of weights one forward of `tier` reads (the projections' and the head's)."""
        return sum(p.linear(tier).nbytes() for p in self.projections())

    def resident_bytes(self) -> int:
        """Bytes every projection's `Linear`s hold, shared tensors counted once."""
        return unique_bytes(t for p in self.projections() for linear in p.linears() for t in linear.tensors()) + sum(
            linear.nbytes() for p in self.projections() for linear in set(p.linears()) if not linear.tensors())

    def _fused(self, x: torch.Tensor) -> bool:
        """Whether x's pointwise work runs on pointwise.cpp's ops: built, bf16 on the CPU, eager. Tracing is asked first,
        so that a graph never reads (and guards on) `pointwise`: turning it off and on recompiles nothing."""
        return (not torch.compiler.is_compiling() and self.pointwise and x.dtype == torch.bfloat16
                and x.device.type == "cpu")

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """transformers' LlamaRMSNorm: in float32, cast back before the weight."""
        if self._fused(x):
            return pointwise.rms_norm(x, weight, self.eps)
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * h.to(x.dtype)

    def _add_norm(self, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x + y, its norm): a residual's sum and the next block's input, in one pass where fused."""
        if self._fused(x):
            return pointwise.add_rms_norm(x, y, weight, self.eps)
        x = x + y
        return x, self._norm(x, weight)

    def _silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        if self._fused(gate_up):
            return pointwise.silu_mul(gate_up)
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up

    def _rotate(self, x: torch.Tensor, heads: int, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """[B, heads, T, D] of x [B, T, heads * D] under cos, sin [B, T, D] (the model's dtype)."""
        batch, tokens, _ = x.shape
        if self._fused(x):
            cos, sin = cos.expand(batch, tokens, -1), sin.expand(batch, tokens, -1)  # positions [1, T] broadcast
            return pointwise.rotary(x, cos, sin, heads).transpose(1, 2)
        x = x.view(batch, tokens, heads, self.head_dim).transpose(1, 2)
        cos, sin = cos[:, None], sin[:, None]
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | Upto | Causal | None
                ) -> torch.Tensor:
        """[B, T, heads * dim] of q [B, heads, T, D] on k/v [B, kv heads, S, D] under mask [B or 1, 1, T, S]
        (bool: True attends; float: added); `Upto` (T = 1): the columns up to its column; `Causal`: query t attends to
        columns 0..offset + t; None: causal, S = T (a prompt's first chunk: SDPA's causal kernel skips the masked half,
        which it computes under an explicit mask: 2,048 tokens 17 against 36 ms a layer in bf16). These and bool masks
        of more than one query run on our kernel where it is built (`prompt_kernel`) and the call is bf16 on the CPU
        with a head size it takes."""
        batch, heads, tokens, dim = q.shape
        if isinstance(mask, Upto):  # a decode step's columns 0..column, on the CPU kernel (attention.py)
            stacked = q.view(batch, self.kv_heads, heads // self.kv_heads, dim)
            return decode_attention(stacked, k, v, mask.column, dim ** -0.5).reshape(batch, 1, heads * dim)
        kernel = self.prompt_kernel is not None and q.dtype == torch.bfloat16 and q.device.type == "cpu" and dim in (64, 128)
        amx = self.prompt_kernel == "ours with amx"
        if kernel and tokens > 1 and isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
            # The queries are the last T columns, each seeing none after its own (a verification tree's nodes come
            # after their ancestors; a padded prompt's rows are causal): the kernel's causal reach, then the mask.
            return prompt.causal_attention(q, k, v, k.shape[2] - tokens, dim ** -0.5, mask, amx=amx)
        if mask is None or isinstance(mask, Causal):
            offset = 0 if mask is None else mask.offset
            if kernel:
                return prompt.causal_attention(q, k, v, offset, dim ** -0.5, amx=amx)
            if mask is None:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                return out.transpose(1, 2).reshape(batch, tokens, heads * dim)
            mask = causal_mask(offset, tokens, q.device)
        if tokens == 1:  # a group's query heads stacked on the query axis: each key/value head read once
            stacked = q.view(batch, self.kv_heads, heads // self.kv_heads, dim)
            out = F.scaled_dot_product_attention(stacked, k, v, attn_mask=mask)
            return out.reshape(batch, 1, heads * dim)
        if q.device.type == "cpu" and tokens <= MAX_QUERY.get(q.dtype, MAX_QUERY[torch.float32]):
            return grouped_attention(q, k, v, mask, scaling=dim ** -0.5).reshape(batch, tokens, heads * dim)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return out.transpose(1, 2).reshape(batch, tokens, heads * dim)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | Upto | Causal | None, write: Write,
                *, last_only: bool = False, head: bool = True, first_layer: int = 0,
                before_layer: Callable[[int, torch.Tensor], None] | None = None) -> torch.Tensor:
        """Logits [B, T or 1, V] in the model's dtype of input embeddings x [B, T, H] at `positions` [B, T];
        `head=False`: none (an empty [B, 0, V]: a prefill chunk before the last); `first_layer`: x is that block's
        input (a cancelled prefill resumed); `before_layer(index, input)` runs before each block (eager only: a
        cancelled prefill stops there, `engine/decoding/interrupt.py`)."""
        batch, tokens, _ = x.shape
        tier = self.tiers.of(batch * tokens)  # picks the projections' weights (the last block's tail keeps them)
        cos = self.cos[positions].to(x.dtype)
        sin = self.sin[positions].to(x.dtype)
        q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        h = None  # the next block's normed input, where the residual's sum before it computed it
        for index in range(first_layer, len(self.blocks)):
            block = self.blocks[index]
            if before_layer is not None:
                before_layer(index, x)
            if h is None:
                h = self._norm(x, block.attn_norm)
            q, k, v = block.qkv(h, tier).split([q_size, kv_size, kv_size], dim=-1)
            q = self._rotate(q, self.heads, cos, sin)
            k = self._rotate(k, self.kv_heads, cos, sin)
            v = v.view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)
            keys, values = write(index, k, v)
            if last_only and tokens > PROMPT_TAIL and index + 1 == len(self.blocks):
                # Only the last position's logits are read: once the last block's keys and values are written, the
                # rest of it runs on the prompt's last PROMPT_TAIL positions alone.
                q, x, mask = q[:, :, -PROMPT_TAIL:], x[:, -PROMPT_TAIL:], last_rows(mask, tokens, PROMPT_TAIL)
            x, h = self._add_norm(x, block.out(self._attend(q, keys, values, mask), tier), block.mlp_norm)
            mlp = block.down(self._silu_mul(block.gate_up(h, tier)), tier)
            if index + 1 < len(self.blocks):
                x, h = self._add_norm(x, mlp, self.blocks[index + 1].attn_norm)
            else:
                x = x + mlp
        if not head:
            return x.new_empty(batch, 0, self.head.shape[0])
        if last_only:
            x = x[:, -1:]
        return self.output(self._norm(x, self.norm), self.tiers.of(x.shape[0] * x.shape[1]))

    # -- transformers' calling convention, over any of its caches (eager) ---------------------------------
    @torch.inference_mode()
    def __call__(self, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None, *,
                 attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                 past_key_values: Any = None, logits_to_keep: int = 0, first_layer: int = 0, **_: Any) -> CausalOutput:
        """`first_layer`: `inputs_embeds` are that layer's inputs, its cache and the next ones' hold what it
        attends to (`FastLM.forward`)."""
        x = self.embedding(input_ids) if inputs_embeds is None else inputs_embeds
        batch, tokens, _ = x.shape
        past = past_key_values.get_seq_length(first_layer) if past_key_values is not None else 0
        if position_ids is None:
            position_ids = torch.arange(past, past + tokens, device=x.device)[None].expand(batch, tokens)
        mask = self.mask(attention_mask, past, tokens, x.device)

        def write(index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return past_key_values.update(k, v, index) if past_key_values is not None else (k, v)

        # transformers' `logits_to_keep`: 1 = the last position, an empty tensor = none (ModelRunner's NO_LOGITS)
        no_head = isinstance(logits_to_keep, torch.Tensor) and logits_to_keep.numel() == 0
        last_only = not no_head and not isinstance(logits_to_keep, torch.Tensor) and logits_to_keep == 1
        return CausalOutput(self.forward(x, position_ids, mask, write, last_only=last_only, head=not no_head,
                                         first_layer=first_layer, before_layer=checkpoint))

    def mask(self, attention_mask: torch.Tensor | None, past: int, tokens: int, device: torch.device
             ) -> torch.Tensor | Causal | None:
        """[B or 1, 1, T, past + T]: transformers' masks as ours. A 4-D mask is taken as it is (float: added); a 2-D
        one [B, past + T] (1 attends) is joined with causality by column; a query row that would see nothing
        sees everything (its output is a pad's, never read), as transformers does for SDPA. None: plain causality
        on an empty cache (`_attend`'s causal kernel); `Causal(past)`: plain causality after `past` cached columns."""
        if attention_mask is not None and attention_mask.dim() == 4:
            return attention_mask if attention_mask.dtype == torch.bool else attention_mask.to(self.dtype)
        if attention_mask is None and past == 0 and tokens > 1:
            return None
        if attention_mask is None and tokens > 1:
            return Causal(past)
        allowed = causal_mask(past, tokens, device)
        if attention_mask is not None:
            allowed = allowed & attention_mask.bool()[:, None, None, :]
            allowed = allowed | ~allowed.any(dim=-1, keepdim=True)
        return allowed


def last_rows(mask: torch.Tensor | Causal | None, tokens: int, keep: int) -> torch.Tensor | Causal:
    """The mask of a prompt chunk's last `keep` queries, of its mask for all `tokens` queries (`FastLM.mask`)."""
    if mask is None:
        return Causal(tokens - keep)
    if isinstance(mask, Causal):
        return Causal(mask.offset + tokens - keep)
    return mask[:, :, -keep:]


def causal_mask(past: int, tokens: int, device: torch.device) -> torch.Tensor:
    """[1, 1, T, past + T] bool: query t attends to columns 0..past + t."""
    columns = torch.arange(past + tokens, device=device)
    return (columns[None, :] <= past + torch.arange(tokens, device=device)[:, None])[None, None]
