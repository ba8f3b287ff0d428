"""Masks given by a number instead of a tensor, which our attention kernels read as such (`FastLM._attend`)."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Upto(NamedTuple):
    """A decode step's mask given as its column: every row attends to columns 0..column of the cache's buffers (the
    step's own key/value written there), nothing after it."""
    column: torch.Tensor


class Causal(NamedTuple):
    """A prompt chunk's mask given as the cache's length before it: query t (at position offset + t) attends to
    columns 0..offset + t, the chunk's own included (`FastLM.mask` where nothing is padded)."""
    offset: int
