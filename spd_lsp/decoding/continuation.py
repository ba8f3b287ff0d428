"""Continue repaired drafts with the real model: greedy from each draft's own verified prefix.

The alternative to Jacobi re-verification (decoding/verify.py): a draft cut at its first
implausible token gets the model's choice there, then greedy tokens up to max_tokens / the
draft stop rules. All such drafts decode together as one batch on a fork of the prompt cache
through the one step loop (stepping.py, the greedy baseline's state started from the drafts).
Their prefixes differ in length: each row's prefix is fed right-padded in one forward (causal
attention keeps the padding invisible to it), later steps mask the padding gap and give each
row its own positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spd_lsp.decoding.baselines import IndependentState
from spd_lsp.decoding.drafts import DraftRules, Hypothesis
from spd_lsp.decoding.lm import ModelRunner
from spd_lsp.decoding.stepping import run_alone
from spd_lsp.decoding.types import CancelCheck, DecodeOptions, Timings


class RaggedRows:
    """A `stepping.Forward` for rows continuing prompt + prefixes of different lengths (a fork of the prompt cache)."""

    def __init__(self, runner: ModelRunner, prefixes: list[tuple[int, ...]]) -> None:
        self.runner = runner
        prompt = runner.cache.get_seq_length()
        self.lengths = torch.tensor([prompt + len(p) for p in prefixes])  # each row's real positions
        width = max(len(p) for p in prefixes)
        ids = torch.zeros(len(prefixes), width, dtype=torch.long)
        for row, prefix in enumerate(prefixes):
            ids[row, : len(prefix)] = torch.tensor(prefix, dtype=torch.long)
        self.cache = runner.fork(len(prefixes))
        every = runner.score(self.cache, ids)  # [rows, width, V]
        last = (self.lengths - prompt - 1).to(every.device)
        self.logits = every[torch.arange(len(prefixes), device=every.device), last]  # after each row's last token
        self.mask = (torch.arange(prompt + width)[None, :] < self.lengths[:, None]).long()  # the padding gap is 0

    def forward(self, states: list, inputs: torch.Tensor) -> torch.Tensor:
        self.mask = torch.cat([self.mask, self.mask.new_ones(len(self.lengths), 1)], dim=1)
        logits = self.runner.forward(self.cache, embeds=inputs, attention_mask=self.mask,
                                     position_ids=self.lengths[:, None])
        self.lengths += 1
        return logits


@dataclass
class _Greedy(IndependentState):
    """The greedy baseline's rows, keeping the logits each new token was chosen from (its exact verdict)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.seen: list[list[torch.Tensor]] = [[] for _ in range(self.batch)]

    def select(self) -> None:
        before, logits = self.hyps, self.logits
        super().select()
        for row, (old, new) in enumerate(zip(before, self.hyps)):
            if new is not old:
                self.seen[row].append(logits[row])


def continue_greedily(
    runner: ModelRunner,
    starts: list[Hypothesis],
    remainder: str,
    rules: DraftRules,
    options: DecodeOptions,
    cancelled: CancelCheck,
) -> list[tuple[Hypothesis, torch.Tensor]]:
    """Each draft (not finished, below the step budget) continued greedily; with the logits [new tokens, V]
    each new token was chosen from. `remainder` is the prompt's healed text (the budget's extra token);
    `runner`'s cache holds the prompt and stays untouched."""
    ragged = RaggedRows(runner, [h.tokens for h in starts])
    rows = _Greedy(remainder, rules, options, len(starts), False, None, starts=tuple(starts), cancelled=cancelled,
                   timings=Timings(), logits=ragged.logits)  # own timings: the caller's verify_s counts it all
    run_alone(runner, rows, forward=ragged.forward)
    return [(hyp, torch.stack(seen) if seen else ragged.logits[:0]) for hyp, seen in zip(rows.hyps, rows.seen)]
