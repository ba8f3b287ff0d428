"""Log-linear mix of LM and n-gram probabilities (SPD_SPEC step 4), as one tensor function."""

from __future__ import annotations

import torch


def interpolate(lm_logp: torch.Tensor, p_ngram: torch.Tensor, alpha: float, log_delta: float) -> torch.Tensor:
    """log p_f = (1-α) log p_lm + α log p_ngram, per draft row [k, C].

    Candidates without n-gram support are dropped (-inf); a row with no supported
    candidate at all keeps its LM candidates, penalised by log δ.
    """
    if alpha == 0.0:
        return lm_logp
    lm_part = (1.0 - alpha) * lm_logp
    supported = p_ngram > 0
    mixed = torch.where(supported, lm_part + alpha * torch.log(p_ngram.clamp_min(1e-30)), float("-inf"))
    unsupported_row = ~supported.any(dim=1, keepdim=True)
    return torch.where(unsupported_row, lm_part + log_delta, mixed)
