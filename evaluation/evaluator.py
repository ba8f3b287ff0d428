"""The paper's quality measure in miniature: perplexity of each draft under an evaluator LM.

No larger local model ships with the project, so the evaluator is the bundled
model itself in float32 at temperature 1 (the paper uses a larger Llama).
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Sequence

import torch
from transformers import DynamicCache


class PerplexityEvaluator:
    def __init__(self, model: Any, tokenizer: Any):
        self.model = model
        self.tokenizer = tokenizer
        # transformers 5 renames past_key_values to cache; accept both generations.
        self._cache_kwarg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    @torch.inference_mode()
    def perplexities(self, prefix: str, drafts: Sequence[str]) -> list[float]:
        """exp(mean NLL) of each draft's tokens after the prefix; the prefix runs once."""
        prefix_ids = self.tokenizer.encode(prefix, add_special_tokens=False)
        if not prefix_ids or not drafts:
            return []
        cache = DynamicCache(config=self.model.config)
        out = self.model(input_ids=torch.tensor([prefix_ids]), use_cache=True, **{self._cache_kwarg: cache})
        first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
        scores = []
        for draft in drafts:
            ids = self.tokenizer.encode(draft, add_special_tokens=False)
            if not ids:
                scores.append(float("nan"))
                continue
            out = self.model(input_ids=torch.tensor([ids]), use_cache=True, **{self._cache_kwarg: cache})
            logits = out.logits[0].float()
            cache.crop(-len(ids))  # negative: drop the draft again
            logp = torch.cat([first[None], torch.log_softmax(logits[:-1], dim=-1)])
            nll = -logp.gather(1, torch.tensor(ids)[:, None]).mean().item()
            scores.append(math.exp(nll))
        return scores
