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
from spd_lsp.engine.fast.arch import Arch, arch_of
from spd_lsp.engine.fast.arch import unsupported as unsupported  # noqa: PLC0414  (re-exported: the loader's check)
from spd_lsp.engine.fast.layouts import Linear, unique_bytes
from spd_lsp.engine.fast.layouts.dense import Dense
from spd_lsp.engine.fast.masks import Causal, Upto
from spd_lsp.engine.fast.plan import Tiers
from spd_lsp.engine.kernels import pointwise, prompt
from spd_lsp.engine.kernels.attention import decode_attention

# A prompt's last block past its keys and values runs on its last this many positions (its logits: the last one's).
# Not 1: oneDNN's packed bf16 weights gave one row another rounding than the same row among 500 (1 of 12 prompts
# off by a bf16 step); at 16 rows, 12 of 12 prompts' logits were the whole forward's, bit for bit. Above
# the decode tier, so the rows stay on the weights the rest of the prompt ran on.
PROMPT_TAIL = 16

Write = Callable[[int, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


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


def _norm_weight(module: torch.nn.Module, *, gemma: bool) -> torch.Tensor:
    """A norm's weight as the forward multiplies by it: Llama's as it is; Gemma's 1 + weight in fp32 (as transformers'
    Gemma norm computes it, and as a GGUF holds it)."""
    weight = module.weight.detach()
    return 1.0 + weight.float() if gemma else weight


# Positions the rotary tables hold at first: they grow (to the next power of two) when a forward reaches past them,
# so they are sized by the context in use, not by the model's (Gemma-3's two tables for its 32,768 positions held
# 64 MB in bf16, where the CPU's shipped prompts stay under ~1,500 tokens).
FIRST_POSITIONS = 2048


def rotary_table(theta: float, factor: float, dim: int, length: int, device: torch.device
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [length, dim] (fp32) of transformers' default (or linearly scaled) rotary frequencies."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim))
    if factor != 1.0:
        inv_freq = inv_freq / factor  # transformers' linear scaling
    freqs = torch.outer(torch.arange(length, dtype=torch.float32, device=device), inv_freq)
    table = torch.cat([freqs, freqs], dim=-1)
    return table.cos(), table.sin()


@dataclass
class Block:
    attn_norm: torch.Tensor
    qkv: Projection
    out: Projection
    mlp_norm: torch.Tensor
    gate_up: Projection
    down: Projection
    q_norm: torch.Tensor | None = None  # per head, before the rotation (Qwen3, Gemma-3)
    k_norm: torch.Tensor | None = None
    post_attn_norm: torch.Tensor | None = None  # on the attention's output, before the residual sum (Gemma-3)
    post_mlp_norm: torch.Tensor | None = None  # on the MLP's output, before the residual sum (Gemma-3)


@dataclass
class CausalOutput:
    logits: torch.Tensor


class FastLM(torch.nn.Module):
    """The decoder of a causal LM of a family `arch.py` covers, on its weights (`Block`s of `Projection`s); built from a
    transformers (or light) model by `of_module`, or from a GGUF's blocks by `engine/fast/gguf_model.py`. `tiers`:
    which forward sizes take which of each projection's `Linear`s."""

    def __init__(self, arch: Arch, blocks: list[Block], *, norm: torch.Tensor, output: Projection,
                 embedding: torch.nn.Module, dtype: torch.dtype, device: torch.device, hf: Any = None) -> None:
        super().__init__()
        self.arch = arch
        self.dtype, self.device = dtype, device
        self.hf = [hf]  # not a submodule: the model whose weights these are (transformers' or the light one)
        self.embedding = embedding
        self.heads, self.kv_heads, self.head_dim = arch.heads, arch.kv_heads, arch.head_dim
        self.eps, self.vocab, self.scale = arch.eps, arch.vocab, arch.scale
        self.tiers = Tiers()
        self.blocks = blocks
        self.norm = norm
        self.output = output
        self.head = output.prefill.weight if isinstance(output.prefill, Dense) else None  # the float head, if any
        # Rotary tables as transformers computes them (fp32), kept in the model's dtype: the forward casts them to it
        # anyway. Sized by the positions in use (`reserve_positions`); `on_grown` callbacks run after they grew.
        self.tables: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.on_grown: list[Callable[[], None]] = []
        self.reserve_positions(FIRST_POSITIONS)
        # The plan's attention and pointwise kernels, once the backend loaded them: `prompt_kernel` ("ours" or "ours
        # with amx": a prompt's and a tree's causal attention), `pointwise` (the eager forward's norms, rotary and
        # SiLU in bf16 on the CPU, never in a traced graph: inductor fuses those itself).
        self.prompt_kernel: str | None = None
        self.pointwise = False

    @classmethod
    def of_module(cls, model: Any, decode: list[dict[str, Linear]] | None = None, *, head: Linear | None = None
                  ) -> "FastLM":
        """On a transformers (or light) model's weights: its q/k/v and gate/up weights become views of one fused
        weight each (no copy); `decode`: per layer, the `Linear` of each fused projection for decode-tier forwards
        where the loader has one; `head`: likewise for the output projection."""
        arch = arch_of(model.config)
        weight = model.get_input_embeddings().weight
        blocks = []
        for index, layer in enumerate(model.model.layers):
            attn, mlp = layer.self_attn, layer.mlp
            given = decode[index] if decode else {}
            qkv, qkv_bias = _fused([attn.q_proj, attn.k_proj, attn.v_proj])
            gate_up, _ = _fused([mlp.gate_proj, mlp.up_proj])
            gemma = arch.gemma_norms
            blocks.append(Block(
                attn_norm=_norm_weight(layer.input_layernorm, gemma=gemma),
                qkv=Projection(Dense(qkv), qkv_bias, decode=given.get("qkv")),
                out=Projection(Dense(attn.o_proj.weight.detach()), _bias(attn.o_proj), decode=given.get("out")),
                mlp_norm=_norm_weight(layer.pre_feedforward_layernorm if arch.sandwich else
                                      layer.post_attention_layernorm, gemma=gemma),
                gate_up=Projection(Dense(gate_up), None, decode=given.get("gate_up")),
                down=Projection(Dense(mlp.down_proj.weight.detach()), None, decode=given.get("down")),
                q_norm=_norm_weight(attn.q_norm, gemma=gemma) if arch.qk_norm else None,
                k_norm=_norm_weight(attn.k_norm, gemma=gemma) if arch.qk_norm else None,
                post_attn_norm=_norm_weight(layer.post_attention_layernorm, gemma=gemma) if arch.sandwich else None,
                post_mlp_norm=_norm_weight(layer.post_feedforward_layernorm, gemma=gemma) if arch.sandwich else None,
            ))
        output = Projection(Dense(model.get_output_embeddings().weight.detach()), None, decode=head)
        return cls(arch, blocks, norm=_norm_weight(model.model.norm, gemma=arch.gemma_norms), output=output,
                   embedding=model.get_input_embeddings(), dtype=weight.dtype, device=weight.device, hf=model)

    @property
    def positions(self) -> int:
        """Positions the rotary tables hold now."""
        return self.tables[0][0].shape[0]

    def reserve_positions(self, positions: int) -> None:
        """Rotary tables for at least `positions` positions (0 .. positions - 1): where they hold fewer, made again for
        the next power of two (at least `FIRST_POSITIONS`), then `on_grown` told. Every forward's caller asks first."""
        if self.tables and positions <= self.positions:
            return
        length = max(FIRST_POSITIONS, 1 << max(0, positions - 1).bit_length())
        arch = self.arch
        tables = [rotary_table(rope.theta, rope.factor, arch.head_dim, length, self.device) for rope in arch.ropes]
        self.tables = [(cos.to(self.dtype), sin.to(self.dtype)) for cos, sin in tables]
        self.cos, self.sin = self.tables[0]
        for grown in self.on_grown:
            grown()

    def projections(self) -> list[Projection]:
        """Every layer's projections, then the head."""
        return [p for block in self.blocks for p in (block.qkv, block.out, block.gate_up, block.down)] + [self.output]

    def release_float_weights(self) -> None:
        """After every layer's tiers left their float weights (`Dense`) for other layouts: the transformers/light
        model's own are emptied (its forward cannot run from then on, and `fast.build` refuses it)."""
        model = self.hf[0]
        if model is None:
            return
        for layer in model.model.layers:  # their weights are views of the plain ones: dropped with them
            for module in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                           layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj):
                module.weight = torch.nn.Parameter(self.norm.new_empty(0), requires_grad=False)
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
        """Whether x's pointwise work runs on pointwise.cpp's ops: built, bf16 on the CPU, eager, Llama's norms and
        SiLU. Tracing is asked first, so that a graph never reads (and guards on) `pointwise`: turning it off and on
        recompiles nothing."""
        return (not torch.compiler.is_compiling() and self.pointwise and x.dtype == torch.bfloat16
                and x.device.type == "cpu" and not self.arch.gemma_norms)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """transformers' RMSNorm of the family: Llama's in float32, cast back before the weight; Gemma's times the
        (fp32) weight, cast back after it."""
        if self._fused(x):
            return pointwise.rms_norm(x, weight, self.eps)
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.arch.gemma_norms:
            return (h * weight).to(x.dtype)
        return weight * h.to(x.dtype)

    def _add_norm(self, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x + y, its norm): a residual's sum and the next block's input, in one pass where fused."""
        if self._fused(x):
            return pointwise.add_rms_norm(x, y, weight, self.eps)
        x = x + y
        return x, self._norm(x, weight)

    def _act_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """act(gate) * up of the MLP's fused gate/up output."""
        if self.arch.activation == "silu" and self._fused(gate_up):
            return pointwise.silu_mul(gate_up)
        gate, up = gate_up.chunk(2, dim=-1)
        if self.arch.activation == "gelu_tanh":
            return F.gelu(gate, approximate="tanh") * up
        return F.silu(gate) * up

    def _head_norm(self, x: torch.Tensor, heads: int, weight: torch.Tensor | None) -> torch.Tensor:
        """x [B, T, heads * D] with each head normed by `weight` [D] (Qwen3's and Gemma-3's q/k norms), or as it is."""
        if weight is None:
            return x
        batch, tokens, _ = x.shape
        return self._norm(x.view(batch, tokens, heads, self.head_dim), weight).view(batch, tokens, -1)

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
            return decode_attention(stacked, k, v, mask.column, self.scale).reshape(batch, 1, heads * dim)
        kernel = self.prompt_kernel is not None and q.dtype == torch.bfloat16 and q.device.type == "cpu" and dim in (64, 128)
        amx = self.prompt_kernel == "ours with amx"
        if kernel and tokens > 1 and isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
            # The queries are the last T columns, each seeing none after its own (a verification tree's nodes come
            # after their ancestors; a padded prompt's rows are causal): the kernel's causal reach, then the mask.
            return prompt.causal_attention(q, k, v, k.shape[2] - tokens, self.scale, mask, amx=amx)
        if mask is None or isinstance(mask, Causal):
            offset = 0 if mask is None else mask.offset
            if kernel:
                return prompt.causal_attention(q, k, v, offset, self.scale, amx=amx)
            if mask is None:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, scale=self.scale)
                return out.transpose(1, 2).reshape(batch, tokens, heads * dim)
            mask = causal_mask(offset, tokens, q.device)
        if tokens == 1:  # a group's query heads stacked on the query axis: each key/value head read once
            stacked = q.view(batch, self.kv_heads, heads // self.kv_heads, dim)
            out = F.scaled_dot_product_attention(stacked, k, v, attn_mask=mask, scale=self.scale)
            return out.reshape(batch, 1, heads * dim)
        if q.device.type == "cpu" and tokens <= MAX_QUERY.get(q.dtype, MAX_QUERY[torch.float32]):
            return grouped_attention(q, k, v, mask, scaling=self.scale).reshape(batch, tokens, heads * dim)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, scale=self.scale)
        return out.transpose(1, 2).reshape(batch, tokens, heads * dim)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | Upto | Causal | None, write: Write,
                *, last_only: bool = False, head: bool = True, first_layer: int = 0,
                before_layer: Callable[[int, torch.Tensor], None] | None = None,
                columns: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, T or 1, V] in the model's dtype of input embeddings x [B, T, H] at `positions` [B, T];
        `head=False`: none (an empty [B, 0, V]: a prefill chunk before the last); `first_layer`: x is that block's
        input (a cancelled prefill resumed); `before_layer(index, input)` runs before each block (eager only: a
        cancelled prefill stops there, `engine/decoding/interrupt.py`); `columns`: the cache columns the tokens are
        written at [T] (None: the last ones of what `write` returns), which sliding-window layers measure from."""
        batch, tokens, _ = x.shape
        tier = self.tiers.of(batch * tokens)  # picks the projections' weights (the last block's tail keeps them)
        rotations = [(cos[positions].to(x.dtype), sin[positions].to(x.dtype)) for cos, sin in self.tables]
        arch = self.arch
        windowed: dict[bool, Any] = {False: mask}  # a sliding layer's mask, made on the first such layer
        q_size, kv_size = arch.q_size, arch.kv_size
        h = None  # the next block's normed input, where the residual's sum before it computed it
        for index in range(first_layer, len(self.blocks)):
            block = self.blocks[index]
            if before_layer is not None:
                before_layer(index, x)
            if h is None:
                h = self._norm(x, block.attn_norm)
            cos, sin = rotations[arch.rope_of[index]]
            q, k, v = block.qkv(h, tier).split([q_size, kv_size, kv_size], dim=-1)
            q = self._rotate(self._head_norm(q, self.heads, block.q_norm), self.heads, cos, sin)
            k = self._rotate(self._head_norm(k, self.kv_heads, block.k_norm), self.kv_heads, cos, sin)
            v = v.view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)
            keys, values = write(index, k, v)
            sliding = arch.sliding[index]
            if sliding not in windowed:
                windowed[sliding] = window_mask(mask, columns, tokens, keys.shape[2], arch.window, x.device)
            layer_mask = windowed[sliding]
            if last_only and tokens > PROMPT_TAIL and index + 1 == len(self.blocks):
                # Only the last position's logits are read: once the last block's keys and values are written, the
                # rest of it runs on the prompt's last PROMPT_TAIL positions alone.
                q, x, layer_mask = q[:, :, -PROMPT_TAIL:], x[:, -PROMPT_TAIL:], last_rows(layer_mask, tokens,
                                                                                             PROMPT_TAIL)
            attended = block.out(self._attend(q, keys, values, layer_mask), tier)
            if block.post_attn_norm is not None:  # Gemma-3: normed, summed, then the MLP's own norm
                x = x + self._norm(attended, block.post_attn_norm)
                h = self._norm(x, block.mlp_norm)
            else:
                x, h = self._add_norm(x, attended, block.mlp_norm)
            mlp = block.down(self._act_mul(block.gate_up(h, tier)), tier)
            if block.post_mlp_norm is not None:
                mlp = self._norm(mlp, block.post_mlp_norm)
            if index + 1 < len(self.blocks):
                x, h = self._add_norm(x, mlp, self.blocks[index + 1].attn_norm)
            else:
                x = x + mlp
        if not head:
            return x.new_empty(batch, 0, self.vocab)
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
        self.reserve_positions(past + tokens)  # a row's positions never pass its columns
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


def window_mask(mask: torch.Tensor | Upto | Causal | None, own: torch.Tensor | None, tokens: int, columns: int,
                window: int | None, device: torch.device) -> torch.Tensor | Upto | Causal | None:
    """`mask` of a layer whose queries see only the last `window` columns up to their own (a Gemma-3 sliding layer),
    over `columns` key columns: a bool mask [B or 1, 1, T, S] of both, or `mask` unchanged where no query can reach
    back that far. `own`: each query's own column [T] (None: the last `tokens` columns, as in an eager forward)."""
    if window is None or columns <= window:
        return mask
    if own is None:
        own = torch.arange(columns - tokens, columns, device=device)
    span = torch.arange(columns, device=device)
    band = (span[None, :] > own[:, None] - window) & (span[None, :] <= own[:, None])
    if isinstance(mask, Upto):
        return band[None, None]
    if mask is None or isinstance(mask, Causal):
        return band[None, None]  # causal and windowed: the band says both
    if mask.dtype == torch.bool:
        return mask & band[None, None, :, : mask.shape[-1]]
    return mask.masked_fill(~band[None, None, :, : mask.shape[-1]], float("-inf"))


def causal_mask(past: int, tokens: int, device: torch.device) -> torch.Tensor:
    """[1, 1, T, past + T] bool: query t attends to columns 0..past + t."""
    columns = torch.arange(past + tokens, device=device)
    return (columns[None, :] <= past + torch.arange(tokens, device=device)[:, None])[None, None]
