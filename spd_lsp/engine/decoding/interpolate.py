"""Log-linear mix of LM and n-gram probabilities (Superposed Decoding's n-gram interpolation, Shen et al. 2024, arXiv
2405.18400), as one tensor function."""

from __future__ import annotations

import torch


def interpolate(
    lm_logp: torch.Tensor, p_ngram: torch.Tensor, alpha: float, log_delta: float, *, drop_unsupported: bool = True
) -> torch.Tensor:
    """log p_f = (1-α) log p_lm + α log p_ngram, per draft row [k, C].

    A candidate without n-gram support keeps its LM term penalised by log δ. With
    `drop_unsupported` (the paper) it is dropped (-inf) instead wherever its row
    has a supported candidate: then the n-grams veto every token they never saw.
    A candidate the LM rules out (-inf: a special token, one inconsistent with
    healing) stays out whatever the n-grams say, also at α = 1.
    """
    if alpha == 0.0:
        return lm_logp
    lm_part = (1.0 - alpha) * lm_logp.clamp_min(torch.finfo(lm_logp.dtype).min)  # 0 * -inf would be NaN
    supported = p_ngram > 0
    penalised = lm_part + log_delta
    mixed = torch.where(supported, lm_part + alpha * torch.log(p_ngram.clamp_min(1e-30)), penalised)
    possible = lm_logp > float("-inf")
    if drop_unsupported:
        possible &= supported | ~supported.any(dim=1, keepdim=True)
    return torch.where(possible, mixed, float("-inf"))
