"""Superposed Decoding (Shen et al. 2024): k drafts from one batch-1 autoregressive pass.

Each step feeds ONE embedding, the draft-probability-weighted sum of the drafts'
last-token embeddings, then expands k drafts x top candidates of the shared LM
distribution, mixes in n-gram probabilities per draft and keeps the best k.
"""

from __future__ import annotations

import time

import torch

from ngram_db import NgramSource
from spd_lsp.decoding.drafts import DraftRules, FinishedPool, Hypothesis, extension_totals, select
from spd_lsp.decoding.interpolate import interpolate
from spd_lsp.decoding.lm import ModelRunner
from spd_lsp.decoding.placement import CPU, model_step
from spd_lsp.decoding.types import CancelCheck, Cancelled, DecodeOptions, Timings
from spd_lsp.decoding.verify import verify


def superposition_weights(hyps: list[Hypothesis], *, device: torch.device = CPU) -> torch.Tensor:
    """gamma_i = p_i / sum_j p_j, with p_i the draft's probability (softmax of log scores)."""
    return torch.softmax(torch.tensor([h.score for h in hyps], dtype=torch.float32, device=device), dim=0)


def superposed_embedding(runner: ModelRunner, hyps: list[Hypothesis]) -> torch.Tensor:
    """A gather of k embedding rows and a weighted sum; shared last tokens add their weights."""
    last = torch.tensor([h.tokens[-1] for h in hyps], dtype=torch.long, device=runner.device)
    rows = runner.embed(last)  # [k, H]
    gamma = superposition_weights(hyps, device=rows.device).to(rows.dtype)
    return (gamma[:, None] * rows).sum(dim=0)[None, None, :]  # [1, 1, H]


def ngram_probabilities(
    ngrams: NgramSource, context: list[int], hyps: list[Hypothesis], cand_ids: torch.Tensor, options: DecodeOptions
) -> torch.Tensor:
    """p_ngram for every (draft, candidate), on cand_ids' device; contexts are prompt + draft tokens."""
    span = max(options.ngram_weights) - 1
    tail = context[-span:]  # never copy the whole prompt per draft and step
    contexts = [(tail + list(h.tokens))[-span:] for h in hyps]
    p = ngrams.p_ngram(contexts, cand_ids.tolist(), options.ngram_weights)
    return torch.tensor(p, dtype=torch.float32, device=cand_ids.device)


def superposed_decode(
    runner: ModelRunner,
    logits: torch.Tensor,
    prompt_ids: list[int],
    remainder: str,
    rules: DraftRules,
    options: DecodeOptions,
    ngrams: NgramSource | None,
    cancelled: CancelCheck,
    timings: Timings,
) -> list[Hypothesis]:
    """Run SPD from the prompt's last logits; returns finished and live drafts (unranked)."""
    alpha = options.alpha if ngrams is not None else 0.0
    first_logits = logits
    finished = FinishedPool(options.k)
    hyps = [Hypothesis(remainder=remainder)]
    steps = options.step_budget(remainder)
    for step in range(steps):
        if cancelled():
            raise Cancelled()
        lm_logp = torch.log_softmax(logits / options.temperature, dim=-1)
        cand_ids, cand_lm = rules.propose(lm_logp, hyps, options.pool)
        p_ngram = torch.zeros_like(cand_lm)
        if alpha > 0.0:
            started = time.perf_counter()
            p_ngram = ngram_probabilities(ngrams, prompt_ids, hyps, cand_ids, options)
            timings.ngram_s += time.perf_counter() - started
        mixed = interpolate(cand_lm, p_ngram, alpha, options.log_delta, drop_unsupported=options.drop_unsupported)
        hyps, _ = select(hyps, cand_ids, extension_totals(hyps, mixed), options.k, rules, finished)
        if not hyps or finished.saturated(hyps) or step == steps - 1:
            break
        with model_step(timings, runner.device):
            if options.reset_every and (step + 1) % options.reset_every == 0:
                logits = reset_to_best(runner, prompt_ids, hyps)
            else:
                logits = runner.forward(runner.cache, embeds=superposed_embedding(runner, hyps))
    drafts = list(finished.by_text.values()) + hyps
    if options.verify_rounds:
        drafts = verify(runner, first_logits, prompt_ids, remainder, drafts, rules, options, ngrams, timings)
    return drafts


def reset_to_best(runner: ModelRunner, prompt_ids: list[int], hyps: list[Hypothesis]) -> torch.Tensor:
    """Paper 5.3: drop superposed positions and re-feed the best draft's real tokens."""
    best = max(hyps, key=lambda h: h.score)
    logits, _ = runner.prefill(prompt_ids + list(best.tokens))  # reuses the prompt's cache
    return logits
