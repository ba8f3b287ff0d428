"""The one step loop of every decoding method, over a batch of request states.

A state is one request between steps: `select()` reads its newest logits and
chooses its next tokens (the CPU half of a step), `parents()` says which of its
cache rows each of its next rows continues, `inputs()` gives those rows' input
embeddings. `decode_step` runs the selection of every state, then ONE forward for
all that go on. A single request is a batch of one (`run_alone`, with `SoloCache`);
the engine's scheduler (spd_lsp/engine/batcher.py) steps many requests together.

Superposed Decoding takes one row per request; the batched baselines take k.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable, Protocol

import torch
from transformers import DynamicCache

from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.placement import device_sync
from spd_lsp.api import CancelCheck, Cancelled, Timings


@dataclass(kw_only=True)
class Progress:
    """What every step state carries besides its method's own fields."""

    cancelled: CancelCheck
    timings: Timings
    logits: torch.Tensor  # [rows, V], the newest
    step: int = 0
    done: bool = False

    def begin_step(self) -> None:
        if self.cancelled():
            raise Cancelled()


class StepState(Protocol):
    done: bool
    logits: torch.Tensor  # [rows, V], the newest
    timings: Timings

    def select(self) -> None:
        """Choose the next tokens from `logits`; sets `done` when the drafts are final."""

    def parents(self) -> list[int]:
        """For each next row, the row of this request's cache it continues."""

    def inputs(self, runner: ModelRunner) -> torch.Tensor:
        """The next rows' input embeddings [rows, 1, H]."""

    def own_forward(self, runner: ModelRunner) -> torch.Tensor | None:
        """Logits from a model call of the state's own (SPD's reset), else None: a batch-1-only case."""


# Runs the model on `inputs` [B, 1, H] of `states` (their rows in order); returns logits [B, V].
Forward = Callable[[list, torch.Tensor], torch.Tensor]


def decode_step(runner: ModelRunner, states: list, forward: Forward) -> None:
    """One step of every state: select, then ONE forward for all that go on."""
    for kind, group in _kinds(states):
        if len(group) > 1 and hasattr(kind, "select_together"):
            kind.select_together(group)
        else:
            for state in group:
                state.select()
    going = [state for state in states if not state.done]
    if not going:
        return
    started = time.perf_counter()
    own = going[0].own_forward(runner) if len(states) == 1 else None
    if own is not None:
        going[0].logits = own
    else:
        by_state = {}
        for kind, group in _kinds(going):
            together = len(group) > 1 and hasattr(kind, "inputs_together")
            rows = kind.inputs_together(runner, group) if together else [state.inputs(runner) for state in group]
            by_state.update(zip(map(id, group), rows))
        inputs = [by_state[id(state)] for state in going]
        logits = forward(going, torch.cat(inputs, dim=0))
        row = 0
        for state, rows in zip(going, inputs):
            state.logits = logits[row : row + rows.shape[0]]
            row += rows.shape[0]
    device_sync(runner.device)
    spent = time.perf_counter() - started
    for state in going:
        state.timings.model_s += spent
        state.timings.steps += 1


def _kinds(states: list) -> list[tuple[type, list]]:
    """The states by class, in order: a method may step its requests together (`select_together`,
    `inputs_together`: the full-vocabulary work and the embeddings once for all, not per request)."""
    kinds: dict[type, list] = {}
    for state in states:
        kinds.setdefault(type(state), []).append(state)
    return list(kinds.items())


class SoloCache:
    """One request's cache: the runner's prompt cache itself while a single row continues it
    (SPD, greedy; the engine rewinds it after), a private copy once rows fork or reorder (baselines)."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        self.private: DynamicCache | None = None
        self.rows = 1

    def forward(self, states: list, inputs: torch.Tensor) -> torch.Tensor:
        parents = states[0].parents()
        if parents != list(range(self.rows)):
            if self.private is None:
                self.private = copy.deepcopy(self.runner.cache)
            self.private.reorder_cache(torch.tensor(parents, dtype=torch.long, device=self.runner.device))
        self.rows = len(parents)
        return self.runner.forward(self.private or self.runner.cache, embeds=inputs)


def run_alone(runner: ModelRunner, state: StepState, *, forward: Forward | None = None) -> None:
    """The single-request path: step `state` as a batch of one until its drafts are final.

    `forward`: where its rows live (default: a `SoloCache` of the runner's prompt cache).
    """
    forward = forward or SoloCache(runner).forward
    while not state.done:
        decode_step(runner, [state], forward)
