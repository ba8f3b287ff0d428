"""Baselines in the same engine, for honest comparisons with SPD.

greedy (batch 1), nucleus as k sequential passes (the paper's baseline) and as one
batch of k (the fair modern peer), beam search with k beams. All reuse the prompt
cache and apply the same token healing and stop rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spd_lsp.engine.decoding.drafts import DraftRules, FinishedPool, Hypothesis, extension_totals, select
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.stepping import Progress
from spd_lsp.api import DecodeOptions


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


@dataclass
class IndependentState(Progress):
    """`batch` independent drafts (greedy or nucleus) between steps: a `stepping.StepState` of `batch` rows."""

    remainder: str
    rules: DraftRules
    options: DecodeOptions
    batch: int
    sample: bool
    generator: torch.Generator | None
    # Rows continuing these drafts (one each; `logits` then [batch, V], theirs) instead of all
    # starting at the prompt: verification's continuation (decoding/continuation.py).
    starts: tuple[Hypothesis, ...] = ()

    def __post_init__(self) -> None:
        self.logits = self.logits.expand(self.batch, -1)
        self.hyps = list(self.starts) or [Hypothesis(remainder=self.remainder) for _ in range(self.batch)]
        self.temperature = self.options.experimental.nucleus_temperature if self.sample else 1.0
        self.steps = self.options.step_budget(self.remainder)  # tokens per draft
        self.tokens: torch.Tensor | None = None

    def select(self) -> None:
        self.begin_step()
        logits, options = self.logits, self.options
        model_logp = torch.log_softmax(logits, dim=-1)
        scaled = model_logp if self.temperature == 1.0 else torch.log_softmax(logits / self.temperature, dim=-1)
        logp = constrained_logp(scaled, self.hyps, self.rules)
        tokens = sample_rows(logp, options.experimental.top_p, self.generator) if self.sample else logp.argmax(dim=-1)
        token_logp = model_logp.gather(1, tokens[:, None]).squeeze(1)
        self.hyps = [
            h if self._final(h) else self.rules.extend(h, int(t), h.score + float(lp))
            for h, t, lp in zip(self.hyps, tokens.tolist(), token_logp.tolist())
        ]
        self.tokens = tokens
        self.step += 1
        self.done = all(map(self._final, self.hyps))

    def _final(self, hyp: Hypothesis) -> bool:
        return hyp.finished or len(hyp.tokens) >= self.steps

    def parents(self) -> list[int]:
        forks = self.step == 1 and not self.starts  # the prompt forks into rows
        return [0] * self.batch if forks else list(range(self.batch))

    def drafts(self) -> list[Hypothesis]:
        return self.hyps

    def inputs(self, runner: ModelRunner) -> torch.Tensor:
        assert self.tokens is not None
        return runner.embed(self.tokens)[:, None, :]

    def own_forward(self, runner: ModelRunner) -> torch.Tensor | None:
        return None


@dataclass
class BeamState(Progress):
    """Beam search with k beams between steps: rows follow the kept parents."""

    remainder: str
    rules: DraftRules
    options: DecodeOptions

    def __post_init__(self) -> None:
        self.finished = FinishedPool(self.options.k)
        self.hyps = [Hypothesis(remainder=self.remainder)]
        self.rows: list[int] = [0]
        self.steps = self.options.step_budget(self.remainder)

    def select(self) -> None:
        self.begin_step()
        options = self.options
        cand_ids, cand_logp = self.rules.propose(torch.log_softmax(self.logits, dim=-1), self.hyps, options.pool)
        self.hyps, self.rows = select(self.hyps, cand_ids, extension_totals(self.hyps, cand_logp), options.k,
                                      self.rules, self.finished)
        self.step += 1
        self.done = not self.hyps or self.finished.saturated(self.hyps) or self.step == self.steps

    def parents(self) -> list[int]:
        return self.rows

    def inputs(self, runner: ModelRunner) -> torch.Tensor:
        return runner.embed(torch.tensor([h.tokens[-1] for h in self.hyps], device=runner.device))[:, None, :]

    def own_forward(self, runner: ModelRunner) -> torch.Tensor | None:
        return None

    def drafts(self) -> list[Hypothesis]:
        return list(self.finished.by_text.values()) + self.hyps
