"""The decoding engine: prompt in, ranked drafts out, for every method.

Owns the model runner (with its reusable prompt KV cache), the token table used
for healing, and the n-gram source. Not thread-safe: one worker calls it.
"""

from __future__ import annotations

import time

import torch

from ngram_db import NgramSource
from spd_lsp.decoding.baselines import beam_decode, independent_decode
from spd_lsp.decoding.drafts import DraftRules, Hypothesis, to_drafts
from spd_lsp.decoding.healing import HealedPrompt, TokenTable, heal
from spd_lsp.decoding.lm import ModelRunner
from spd_lsp.decoding.placement import CPU
from spd_lsp.decoding.superposed import superposed_decode
from spd_lsp.decoding.types import METHODS, CancelCheck, DecodeOptions, DecodeResult, Timings
from spd_lsp.model import LoadedModel


def _never() -> bool:
    return False


class Engine:
    def __init__(self, loaded: LoadedModel, ngrams: NgramSource | None = None):
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer
        self.runner = ModelRunner(loaded.model, loaded.device)
        vocab_size = loaded.model.get_input_embeddings().weight.shape[0]
        self.table = TokenTable(self.tokenizer, vocab_size)
        self.stop_ids = frozenset(_eos_ids(loaded))
        self.candidate_device: torch.device | None = CPU  # where each step's candidates live (placement.py)
        self.ngrams = ngrams
        self._warm_up()

    def _warm_up(self) -> None:
        """One tiny forward so the first real request does not pay the kernels' first-call set-up."""
        self.runner.prefill(self.encode("def f(x):\n    return x\n") or [0, 0])
        self.runner.rewind(0)

    def set_ngrams(self, ngrams: NgramSource | None) -> None:
        self.ngrams = ngrams

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def complete(
        self, prefix: str, options: DecodeOptions, cancelled: CancelCheck | None = None, *, ids: list[int] | None = None
    ) -> DecodeResult:
        """Drafts continuing `prefix`; `ids`, where given, are its tokens (the caller tokenized it already)."""
        if options.method not in METHODS:
            raise ValueError(f"unknown decoding method {options.method!r}; expected one of {', '.join(METHODS)}")
        cancelled = cancelled or _never
        started = time.perf_counter()
        timings = Timings()
        healed = self.healed_prompt(prefix, healing=options.heal, ids=ids)
        prompt = healed.prompt_ids
        rules = self.draft_rules(options)
        logits, timings.reused_tokens = self.runner.prefill(prompt, cancelled)  # its forward syncs the device
        timings.prefill_tokens = len(prompt) - timings.reused_tokens
        timings.prefill_s = time.perf_counter() - started
        try:
            hyps = self._run(options, logits, prompt, healed.remainder, rules, cancelled, timings)
        finally:
            self.runner.rewind(len(prompt))
        drafts = to_drafts(hyps, options.k, self.table, prompt, healed.remainder, stop_at_newline=options.stop_at_newline)
        timings.total_s = time.perf_counter() - started
        return DecodeResult(drafts, timings, options.method)

    def warm(
        self, prefix: str, options: DecodeOptions, cancelled: CancelCheck | None = None, *, ids: list[int] | None = None
    ) -> int:
        """Prefill the prompt `complete` would for these arguments and draft nothing, so that a
        request there reuses the cache; returns the tokens run. Cancelled between chunks."""
        prompt = self.healed_prompt(prefix, healing=options.heal, ids=ids).prompt_ids
        return len(prompt) - self.runner.prefill(prompt, cancelled or _never)[1]

    def draft_rules(self, options: DecodeOptions) -> DraftRules:
        """The stop, healing and placement rules every draft of a request follows."""
        return DraftRules(
            table=self.table, stop_ids=self.stop_ids, stop_at_newline=options.stop_at_newline,
            candidate_device=self.candidate_device,
        )

    def healed_prompt(self, prefix: str, *, healing: bool = True, ids: list[int] | None = None) -> HealedPrompt:
        """What the model is fed for `prefix` (or its given token ids), and the text every draft must first re-produce."""
        return heal(self._with_bos(self.encode(prefix) if ids is None else ids), self.table, enabled=healing)

    def _with_bos(self, ids: list[int]) -> list[int]:
        bos = self.tokenizer.bos_token_id
        if not ids or (bos is not None and getattr(self.tokenizer, "add_bos_token", False)):
            ids = [bos if bos is not None else self.tokenizer.eos_token_id] + ids
        return ids

    def _run(
        self,
        options: DecodeOptions,
        logits: torch.Tensor,
        prompt: list[int],
        remainder: str,
        rules: DraftRules,
        cancelled: CancelCheck,
        timings: Timings,
    ) -> list[Hypothesis]:
        runner = self.runner
        seeded = options.seed is not None  # a generator on the model's device: sampling runs there
        generator = torch.Generator(device=runner.device).manual_seed(options.seed) if seeded else None
        if options.method == "superposed":
            return superposed_decode(runner, logits, prompt, remainder, rules, options, self.ngrams, cancelled, timings)
        if options.method in ("greedy", "nucleus_batched"):
            sample = options.method == "nucleus_batched"
            return independent_decode(
                runner, logits, remainder, rules, options, batch=options.k if sample else 1, sample=sample,
                generator=generator, cancelled=cancelled, timings=timings,
            )
        if options.method == "beam":
            return beam_decode(runner, logits, remainder, rules, options, cancelled, timings)
        drafts: list[Hypothesis] = []  # nucleus: k sequential passes, as in the paper's baseline
        for _ in range(options.k):
            drafts += independent_decode(
                runner, logits, remainder, rules, options, batch=1, sample=True,
                generator=generator, cancelled=cancelled, timings=timings,
            )
            runner.rewind(len(prompt))
        return drafts


def _eos_ids(loaded: LoadedModel) -> set[int]:
    ids: set[int] = set()
    for source in (loaded.model.config, getattr(loaded.model, "generation_config", None), loaded.tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    return ids
