"""Baselines in the same engine, for honest comparisons with SPD.

greedy (batch 1), nucleus as k sequential passes (the paper's baseline) and as one
batch of k (the fair modern peer), beam search with k beams. All reuse the prompt
cache and apply the same token healing and stop rules.
"""

from __future__ import annotations

import torch

from spd_lsp.decoding.drafts import DraftRules, FinishedPool, Hypothesis, extension_totals, select
from spd_lsp.decoding.lm import ModelRunner
from spd_lsp.decoding.placement import model_step
from spd_lsp.decoding.types import CancelCheck, Cancelled, DecodeOptions, Timings


def nucleus_filter(logp: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability reaches top_p, per row."""
    sorted_logp, order = torch.sort(logp, descending=True, dim=-1)
    cumulative = torch.cumsum(torch.exp(sorted_logp), dim=-1)
    drop = cumulative - torch.exp(sorted_logp) >= top_p  # mass before this token already enough
    sorted_logp = sorted_logp.masked_fill(drop, float("-inf"))
    return torch.full_like(logp, float("-inf")).scatter(-1, order, sorted_logp)


def sample_rows(logp: torch.Tensor, top_p: float, generator: torch.Generator | None) -> torch.Tensor:
    probs = torch.softmax(nucleus_filter(logp, top_p), dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def constrained_logp(lm_logp: torch.Tensor, hyps: list[Hypothesis], rules: DraftRules) -> torch.Tensor:
    """Full-vocabulary log-probs per row without special tokens, renormalised over tokens
    consistent with each healing remainder."""
    out = rules.without_special(lm_logp)
    if not any(h.remainder for h in hyps):
        return out  # healing done: nothing more to constrain
    out = out.clone() if out is lm_logp else out  # index_fill has copied already
    for row, hyp in enumerate(hyps):
        if hyp.remainder:
            allowed = rules.table.consistent_with(hyp.remainder, device=out.device)
            masked = torch.full_like(out[row], float("-inf"))
            masked[allowed] = torch.log_softmax(out[row, allowed], dim=0)
            out[row] = masked
    return out


def independent_decode(
    runner: ModelRunner,
    logits: torch.Tensor,
    remainder: str,
    rules: DraftRules,
    options: DecodeOptions,
    *,
    batch: int,
    sample: bool,
    generator: torch.Generator | None,
    cancelled: CancelCheck,
    timings: Timings,
) -> list[Hypothesis]:
    """`batch` independent drafts (greedy or nucleus), one token per row per step."""
    cache = runner.fork(batch) if batch > 1 else runner.cache
    logits = logits.expand(batch, -1)
    hyps = [Hypothesis(remainder=remainder) for _ in range(batch)]
    temperature = options.nucleus_temperature if sample else 1.0
    steps = options.step_budget(remainder)
    for step in range(steps):
        if cancelled():
            raise Cancelled()
        model_logp = torch.log_softmax(logits, dim=-1)
        scaled = model_logp if temperature == 1.0 else torch.log_softmax(logits / temperature, dim=-1)
        logp = constrained_logp(scaled, hyps, rules)
        tokens = sample_rows(logp, options.top_p, generator) if sample else torch.argmax(logp, dim=-1)
        token_logp = model_logp.gather(1, tokens[:, None]).squeeze(1)
        hyps = [
            h if h.finished else rules.extend(h, int(t), h.score + float(lp))
            for h, t, lp in zip(hyps, tokens.tolist(), token_logp.tolist())
        ]
        if all(h.finished for h in hyps) or step == steps - 1:
            break
        with model_step(timings, runner.device):
            logits = runner.forward(cache, ids=tokens[:, None])
    return hyps


def beam_decode(
    runner: ModelRunner,
    logits: torch.Tensor,
    remainder: str,
    rules: DraftRules,
    options: DecodeOptions,
    cancelled: CancelCheck,
    timings: Timings,
) -> list[Hypothesis]:
    """Beam search with k beams over one batch-k cache, reordered to follow the kept parents."""
    finished = FinishedPool(options.k)
    hyps = [Hypothesis(remainder=remainder)]
    cache = None
    steps = options.step_budget(remainder)
    for step in range(steps):
        if cancelled():
            raise Cancelled()
        cand_ids, cand_logp = rules.propose(torch.log_softmax(logits, dim=-1), hyps, options.pool)
        hyps, parents = select(hyps, cand_ids, extension_totals(hyps, cand_logp), options.k, rules, finished)
        if not hyps or finished.saturated(hyps) or step == steps - 1:
            break
        with model_step(timings, runner.device):
            if cache is None:  # first step: every beam's parent is the prompt
                cache = runner.fork(len(hyps))
            else:
                cache.reorder_cache(torch.tensor(parents, dtype=torch.long, device=runner.device))
            logits = runner.forward(cache, ids=torch.tensor([[h.tokens[-1]] for h in hyps], device=runner.device))
    return list(finished.by_text.values()) + hyps
