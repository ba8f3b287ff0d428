"""Superposed Decoding (Shen et al. 2024): k drafts from one batch-1 autoregressive pass.

Each step feeds ONE embedding, the draft-probability-weighted sum of the drafts'
last-token embeddings, then expands k drafts x top candidates of the shared LM
distribution, mixes in n-gram probabilities per draft and keeps the best k.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ngram_db import NgramSource
from spd_lsp.engine.decoding.drafts import DraftRules, FinishedPool, Hypothesis, extension_totals, select
from spd_lsp.engine.decoding.interpolate import interpolate
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.placement import CPU, move_pair
from spd_lsp.engine.decoding.stepping import Progress
from spd_lsp.api import CancelCheck, DecodeOptions
from spd_lsp.engine.decoding.verify import Verification, closes_drafts, verification, verify


def superposition_weights(drafts: list[list[Hypothesis]], *, device: torch.device = CPU) -> torch.Tensor:
    """[requests, most drafts]: gamma_i = p_i / sum_j p_j per request, with p_i a draft's probability
    (softmax of log scores); a request with fewer drafts than the most weighs its missing ones 0."""
    width = max(len(hyps) for hyps in drafts)
    scores = [[h.score for h in hyps] + [float("-inf")] * (width - len(hyps)) for hyps in drafts]
    return torch.softmax(torch.tensor(scores, dtype=torch.float32, device=device), dim=1)


def superposed_embedding(runner: ModelRunner, hyps: list[Hypothesis]) -> torch.Tensor:
    """A gather of k embedding rows and a weighted sum; shared last tokens add their weights. [1, 1, H]"""
    return superposed_embeddings(runner, [hyps])[0]


def superposed_embeddings(runner: ModelRunner, drafts: list[list[Hypothesis]]) -> list[torch.Tensor]:
    """Each request's superposed input [1, 1, H] from its drafts: ONE gather of every request's last
    embeddings and one weighted sum (gamma = softmax of the draft scores; missing drafts weigh 0)."""
    width = max(len(hyps) for hyps in drafts)
    last = torch.tensor([[h.tokens[-1] for h in hyps] + [0] * (width - len(hyps)) for hyps in drafts],
                        dtype=torch.long, device=runner.device)
    rows = runner.embed(last)  # [B, width, H]
    gamma = superposition_weights(drafts, device=rows.device).to(rows.dtype)
    return list((gamma[:, :, None] * rows).sum(dim=1)[:, None, None, :])


def ngram_probabilities(
    ngrams: NgramSource, context: list[int], hyps: list[Hypothesis], cand_ids: torch.Tensor, options: DecodeOptions
) -> torch.Tensor:
    """p_ngram for every (draft, candidate), on cand_ids' device; contexts are prompt + draft tokens."""
    span = max(options.ngram_weights) - 1
    tail = context[-span:]  # never copy the whole prompt per draft and step
    contexts = [(tail + list(h.tokens))[-span:] for h in hyps]
    p = ngrams.p_ngram(contexts, cand_ids.tolist(), options.ngram_weights)
    return torch.tensor(p, dtype=torch.float32, device=cand_ids.device)


@dataclass
class SuperposedState(Progress):
    """One superposed request between steps (a `stepping.StepState` of one row).

    `logits` are the request's newest LM logits [1, V]; `done` once its drafts are final.
    """

    prompt_ids: list[int]
    remainder: str
    rules: DraftRules
    options: DecodeOptions
    ngrams: NgramSource | None

    def __post_init__(self) -> None:
        self.first_logits = self.logits
        self.alpha = self.options.alpha if self.ngrams is not None else 0.0
        # Where verification closes the drafts (`closes_drafts`), the pass leaves their last token to it.
        self.steps = self.options.step_budget(self.remainder) - (1 if closes_drafts(self.options, self.remainder) else 0)
        self.finished = FinishedPool(self.options.k)
        self.hyps = [Hypothesis(remainder=self.remainder)]

    @property
    def resets(self) -> bool:
        """Paper 5.3: this step re-feeds the best draft instead of the superposed embedding."""
        every = self.options.experimental.reset_every
        return bool(every) and self.step % every == 0

    def select(self, *, candidates: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """Expand the drafts by the candidates of `logits` and keep the best k (the CPU half of a step).

        `candidates`: the top `pool` (ids, log p) [1, pool] of `logits`, found with other requests' (`select_together`).
        """
        self.begin_step()
        options = self.options
        if candidates is not None:
            cand_ids, cand_lm = (c.expand(len(self.hyps), -1) for c in candidates)
        else:
            lm_logp = torch.log_softmax(self.logits / options.temperature, dim=-1)
            cand_ids, cand_lm = self.rules.propose(lm_logp, self.hyps, options.pool)
        p_ngram = torch.zeros_like(cand_lm)
        if self.alpha > 0.0:
            started = time.perf_counter()
            p_ngram = ngram_probabilities(self.ngrams, self.prompt_ids, self.hyps, cand_ids, options)
            self.timings.ngram_s += time.perf_counter() - started
        knobs = options.experimental
        mixed = interpolate(cand_lm, p_ngram, self.alpha, knobs.log_delta, drop_unsupported=knobs.drop_unsupported)
        self.hyps, _ = select(self.hyps, cand_ids, extension_totals(self.hyps, mixed), options.k, self.rules, self.finished)
        self.step += 1
        self.done = not self.hyps or self.finished.saturated(self.hyps) or self.step == self.steps

    @staticmethod
    def select_together(states: list[SuperposedState]) -> None:
        """`select` of several requests, the full-vocabulary work (log-softmax, special tokens, top-k, the copy
        to the host) ONCE for each group that shares it: drafts that heal nothing, the same rules, pool and
        temperature. Others select alone (a healing draft's candidates are its own)."""
        groups: dict[tuple, list[SuperposedState]] = {}
        for state in states:
            if any(h.remainder for h in state.hyps) or not state.hyps:
                state.select()
            else:
                rules, options = state.rules, state.options
                key = (id(rules.table), rules.stop_ids, rules.candidate_device, options.pool, options.temperature)
                groups.setdefault(key, []).append(state)
        for group in groups.values():
            rules, options = group[0].rules, group[0].options
            logits = torch.cat([state.logits for state in group])
            lm_logp = rules.without_special(torch.log_softmax(logits / options.temperature, dim=-1))
            top = torch.topk(lm_logp, options.pool)
            ids, logp = move_pair(top.indices, top.values, rules.candidate_device)
            for row, state in enumerate(group):
                state.select(candidates=(ids[row : row + 1], logp[row : row + 1]))

    @staticmethod
    def inputs_together(runner: ModelRunner, states: list[SuperposedState]) -> list[torch.Tensor]:
        """`inputs` of several requests: ONE gather of their drafts' last embeddings and one weighted sum."""
        return superposed_embeddings(runner, [state.hyps for state in states])

    def drafts(self) -> list[Hypothesis]:
        """Finished and live drafts (unranked)."""
        return list(self.finished.by_text.values()) + self.hyps

    def final(self, runner: ModelRunner, *, cancelled: CancelCheck | None = None) -> list[Hypothesis]:
        """The drafts to return, verified where the options say so; `runner`'s cache must hold the prompt.

        `cancelled`: checked while verifying (default: the state's own check)."""
        drafts = self.drafts()
        if self.options.verify_rounds:
            drafts = verify(runner, self.first_logits, self.prompt_ids, self.remainder, drafts, self.rules,
                            self.options, self.ngrams, self.timings, cancelled=cancelled or self.cancelled)
        return drafts

    def verifying(self) -> Verification | None:
        """The verification of the drafts as judging rounds (`verify.verification`); None where the options verify nothing."""
        if not self.options.verify_rounds:
            return None
        return verification(self.prompt_ids, self.remainder, self.drafts(), self.rules, self.options, self.ngrams,
                            self.timings)

    def parents(self) -> list[int]:
        return [0]  # one row: the superposition of the k drafts

    def inputs(self, runner: ModelRunner) -> torch.Tensor:
        return superposed_embedding(runner, self.hyps)

    def own_forward(self, runner: ModelRunner) -> torch.Tensor | None:
        return reset_to_best(runner, self.prompt_ids, self.hyps) if self.resets else None



def reset_to_best(runner: ModelRunner, prompt_ids: list[int], hyps: list[Hypothesis]) -> torch.Tensor:
    """Paper 5.3: drop superposed positions and re-feed the best draft's real tokens."""
    best = max(hyps, key=lambda h: h.score)
    logits, _ = runner.prefill(prompt_ids + list(best.tokens))  # reuses the prompt's cache
    return logits
