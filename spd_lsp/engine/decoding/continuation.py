"""Continue repaired drafts with the real model: greedy from each draft's own verified prefix.

The alternative to Jacobi re-verification (decoding/verify.py): a draft cut at its first
implausible token gets the model's choice there, then greedy tokens up to max_tokens / the
draft stop rules. All such drafts decode together as one batch through the one step loop
(stepping.py, the greedy baseline's state started from the drafts), on the key/values the
verification forward left: each row sees the prompt and its own prefix's columns (its path in
the verification's prefix tree), the rest is masked, and every row runs at its own positions.
No prefix runs twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from spd_lsp.engine.decoding.baselines import IndependentState
from spd_lsp.engine.decoding.drafts import DraftRules, Hypothesis
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.stepping import run_alone
from spd_lsp.api import CancelCheck, DecodeOptions, Timings


class RaggedRows:
    """A `stepping.Forward` for rows continuing different prefixes after one prompt.

    `cache` holds, per row, the prompt (`prompt` positions), then columns of which the row sees only
    `seen[row]` (its prefix, in order; the rest: other rows' tokens, padding). New tokens append.
    """

    def __init__(self, runner: ModelRunner, cache: DynamicCache, prompt: int, seen: list[list[int]]) -> None:
        self.runner, self.cache = runner, cache
        self.mask = torch.zeros(len(seen), cache.get_seq_length(), dtype=torch.long)
        self.mask[:, :prompt] = 1
        for row, columns in enumerate(seen):
            self.mask[row, [prompt + c for c in columns]] = 1
        self.lengths = torch.tensor([prompt + len(c) for c in seen])  # each row's next position

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
    rows: RaggedRows,
    starts: list[Hypothesis],
    logits: torch.Tensor,
    remainder: str,
    rules: DraftRules,
    options: DecodeOptions,
    cancelled: CancelCheck,
) -> list[tuple[Hypothesis, torch.Tensor]]:
    """Each draft in `starts` (the prefixes of `rows`; `logits` [rows, V] after each) continued greedily up
    to the step budget, with the logits [new tokens, V] each new token was chosen from. `remainder` is
    the prompt's healed text (the budget's extra token)."""
    state = _Greedy(remainder, rules, options, len(starts), False, None, starts=tuple(starts), cancelled=cancelled,
                    timings=Timings(), logits=logits)  # own timings: the caller's verify_s counts it all
    run_alone(runner, state, forward=rows.forward)
    return [(hyp, torch.stack(seen) if seen else logits[:0]) for hyp, seen in zip(state.hyps, state.seen)]
