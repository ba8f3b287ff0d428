"""Cancellation inside a forward: a prefill's `CancelCheck`, consulted before each decoder layer.

A prefill chunk long enough to run at the hardware's speed (hundreds of tokens) takes longer
than a typist waits for a superseded request to stop; checking between chunks alone would make
the chunks short and pay a tax per chunk (every chunk reads all the weights again). Here the
forward itself stops: `interruptible(cancelled)` makes the decoder layers hooked by
`hook_layers` raise `Cancelled` before running once `cancelled()` turns true, so a chunk stops
within one layer's time. A forward that calls `checkpoint(layer, hidden)` itself (the fast path's
`FastLM`) raises `Interrupted` instead, with what a prefill needs to resume it at that layer. The
check is thread-local: forwards of other threads are not stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from spd_lsp.api import CancelCheck, Cancelled

_local = threading.local()
HOOKED = "_spd_interruptible"  # set on a model whose layers call `checkpoint`


@contextmanager
def interruptible(cancelled: CancelCheck) -> Iterator[None]:
    """Forwards run in this block (in this thread) stop at their next layer once `cancelled()` is true."""
    outer = getattr(_local, "check", None)
    _local.check = cancelled
    try:
        yield
    finally:
        _local.check = outer


class Interrupted(Cancelled):
    """A forward cancelled before its decoder layer `layer`, whose input there was `hidden` [B, T, H]: the layers
    before it hold the forward's key/values, the others do not. A forward that can start at a layer (the fast
    path's `FastLM`) raises it, so that a prefill can resume there (`ModelRunner.prefill`) rather than start over."""

    def __init__(self, layer: int, hidden: torch.Tensor) -> None:
        super().__init__()
        self.layer, self.hidden = layer, hidden


def checkpoint(layer: int | None = None, hidden: torch.Tensor | None = None) -> None:
    """Raise `Cancelled` where the innermost `interruptible` block's check says so; nothing outside one. Given the
    layer about to run and its input, `Interrupted` with them."""
    check = getattr(_local, "check", None)
    if check is not None and check():
        raise Cancelled() if layer is None or hidden is None else Interrupted(layer, hidden)


def decoder_layers(model: Any) -> torch.nn.ModuleList | None:
    """The model's stack of decoder layers (`model.model.layers` in transformers' causal LMs, `.transformer.h` in
    GPT-2's); None if none is found."""
    owners = (model.get_decoder() if hasattr(model, "get_decoder") else None, getattr(model, "model", None),
              getattr(model, "transformer", None))
    for owner in owners:
        for name in ("layers", "h"):
            layers = getattr(owner, name, None)
            if isinstance(layers, torch.nn.ModuleList) and len(layers) > 0:
                return layers
    return None


def hook_layers(model: Any) -> bool:
    """Make each decoder layer of `model` call `checkpoint` before it runs (once per model); False where
    its layers were not found (its forwards then stop only between them)."""
    if getattr(model, HOOKED, False):
        return True
    layers = decoder_layers(model)
    if layers is None:
        return False
    for layer in layers:
        layer.register_forward_pre_hook(lambda module, args: checkpoint())
    setattr(model, HOOKED, True)
    return True
