"""Where the decode loop's tensors live.

Full-vocabulary work (log-softmax, the special-token mask, top-k, healing
restrictions) runs on the logits' device, the model's. Each step then brings its
few candidates ([drafts, pool] ids and log-probabilities) to the CPU in one copy;
everything after that, per draft and candidate (n-gram lookups in Python/LMDB,
interpolation, the choice of the best k, superposition weights), works there on a
few dozen numbers. A kernel launch costs more than that arithmetic, the choice is
made in Python anyway, and kept on the device a step would cross three times
(candidate ids out for the n-gram lookup, probabilities back in, the ranking out).
`DraftRules(candidate_device=None)` keeps candidates on the device instead;
`scripts/gpu-check.sh` measures both (`bench/bench_decoding.py --placement`).
"""

from __future__ import annotations

import torch

CPU = torch.device("cpu")


def device_sync(device: torch.device) -> None:
    """Wait for the device's queued kernels, so that a clock read next counts them (gpt-fast's device_sync)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def move_pair(ids: torch.Tensor, logp: torch.Tensor, device: torch.device | None) -> tuple[torch.Tensor, torch.Tensor]:
    """ids and log-probabilities on `device` (None: where they are) in ONE copy.

    Both travel as one float64 tensor: token ids are exact in it (below 2**53).
    """
    if device is None or ids.device == device:
        return ids, logp
    packed = torch.stack((ids.to(torch.float64), logp.to(torch.float64))).to(device)
    return packed[0].to(torch.long), packed[1].to(logp.dtype)
