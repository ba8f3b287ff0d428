"""Log-linear mix of LM and n-gram probabilities (SPD_SPEC step 4), as one tensor function."""

from __future__ import annotations

import torch


def interpolate(
    lm_logp: torch.Tensor, p_ngram: torch.Tensor, alpha: float, log_delta: float, drop_unsupported: bool = True
) -> torch.Tensor:
    """log p_f = (1-α) log p_lm + α log p_ngram, per draft row [k, C].

    A candidate without n-gram support keeps its LM term penalised by log δ. With
    `drop_unsupported` (the paper) it is dropped (-inf) instead wherever its row
    has a supported candidate: then the n-grams veto every token they never saw.
    """
    if alpha == 0.0:
        return lm_logp
    lm_part = (1.0 - alpha) * lm_logp
    supported = p_ngram > 0
    penalised = lm_part + log_delta
    mixed = torch.where(supported, lm_part + alpha * torch.log(p_ngram.clamp_min(1e-30)), penalised)
    if not drop_unsupported:
        return mixed
    unsupported_row = ~supported.any(dim=1, keepdim=True)
    return torch.where(unsupported_row | supported, mixed, float("-inf"))
