"""Verification's per-token figures in one pass over each row of logits (`verdict.cpp`): `token_verdicts`."""

from __future__ import annotations

import torch

from spd_lsp.engine.kernels import build


def available() -> bool:
    """The library is loaded (the fast path builds it in its compile thread)."""
    return build.ready()


def token_verdicts(logits: torch.Tensor, tokens: torch.Tensor, banned: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.ops.spd.token_verdicts.default(logits, tokens, banned)
