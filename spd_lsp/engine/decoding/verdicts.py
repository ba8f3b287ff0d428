"""Each token of a draft as the model sees it: its log-probability, the best token's, that token, and its rank, from
one position's logits a row (verification's `_verdict`).

On the CPU this is one pass over each row in a C++ kernel of ours (`engine/kernels/verdict.cpp`) once the kernel
library is loaded (the fast path loads it in its compile thread); tensor ops otherwise (the same numbers up to the last
bit of a log-probability: the kernel sums in another order).
"""

from __future__ import annotations

import torch

from spd_lsp.engine.kernels import verdict


def token_verdicts(logits: torch.Tensor, tokens: torch.Tensor, banned: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For logits [P, V] and tokens [P] (CPU), under log_softmax with the `banned` [B] tokens at -inf: each token's log
    p [P], the best log p [P], the best token [P] (the first of equal maxima), and how many tokens are above it [P]."""
    if logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.bfloat16) and verdict.available():
        return verdict.token_verdicts(logits, tokens, banned)
    logp = torch.log_softmax(logits.float().index_fill(-1, banned.to(logits.device), float("-inf")), dim=-1).cpu()
    token_logp = logp.gather(1, tokens[:, None]).squeeze(1)
    best, choice = logp.max(dim=-1)
    return token_logp, best, choice, (logp > token_logp[:, None]).sum(dim=-1)
