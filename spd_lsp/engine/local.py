"""The decoding engine: prompt in, ranked drafts out, for every method.

Owns the model runner (with its reusable prompt KV cache), the token table used
for healing, and the n-gram source. Not thread-safe: one worker calls it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Sequence

import torch

from ngram_db import NgramSource
from spd_lsp.engine.decoding.baselines import beam_decode, independent_decode
from spd_lsp.engine.decoding.drafts import DraftRules, Hypothesis, to_drafts
from spd_lsp.engine.decoding.healing import HealedPrompt, TokenTable
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.placement import CPU
from spd_lsp.engine.decoding.superposed import superposed_decode
from spd_lsp.api import METHODS, CancelCheck, DecodeOptions, DecodeResult, Timings, never_cancelled
from spd_lsp.engine.model import LoadedModel
from spd_lsp.engine.prompt.build import Prompt, build_prompt, stop_ids
from spd_lsp.engine.prompt.echo import cut_echo
from spd_lsp.engine.prompt.formats import PromptFormat, resolve
from spd_lsp.engine.prompt.layout import Context



class LocalEngine:
    def __init__(self, loaded: LoadedModel, ngrams: NgramSource | None = None):
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer
        self.runner = ModelRunner(loaded.model, loaded.device)
        vocab_size = loaded.model.get_input_embeddings().weight.shape[0]
        self.table = TokenTable(self.tokenizer, vocab_size)
        self.stop_ids = frozenset(_eos_ids(loaded))
        self._formats: dict[str, tuple[PromptFormat, frozenset[int]]] = {}  # per promptFormat setting
        self.candidate_device: torch.device | None = CPU  # where each step's candidates live (placement.py)
        self.ngrams = ngrams
        self._warm_up()

    def _warm_up(self) -> None:
        """One tiny forward and a decode step so the first real request does not pay the kernels' first-call set-up
        (on the fast path: the step's compile, logged with its time)."""
        self.runner.prefill(self.encode("def f(x):\n    return x\n") or [0, 0])
        self.runner.forward(self.runner.cache, embeds=self.runner.embed(torch.tensor([[0]])))
        self.runner.rewind(0)

    def set_ngrams(self, ngrams: NgramSource | None) -> None:
        self.ngrams = ngrams

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def complete(
        self,
        prefix: str,
        options: DecodeOptions,
        cancelled: CancelCheck | None = None,
        *,
        ids: list[int] | None = None,
        suffix: str = "",
        filename: str | None = None,
        snippets: Sequence[tuple[str, str]] = (),
        language: str | None = None,
        prompt_format: str = "auto",
    ) -> DecodeResult:
        """Drafts continuing `prefix`; `ids`, where given, are its tokens (the caller tokenized it already).

        Context, all plain values: `suffix` (the text after the cursor, cut to its budget),
        `filename` (the file's workspace-relative path), `snippets` ((path, code) of other
        files, best first) and `language` reach the model as `prompt_format` ("auto": the
        tokenizer's own family, `prompt/formats.py`) lays them out; drafts stop where they
        start reproducing the suffix. `result.prompt` says what went in.
        """
        if options.method not in METHODS:
            raise ValueError(f"unknown decoding method {options.method!r}; expected one of {', '.join(METHODS)}")
        cancelled = cancelled or never_cancelled
        started = time.perf_counter()
        timings = Timings()
        context = Context(suffix, filename, tuple(snippets), language)
        built = self.prompt(prefix, healing=options.heal, ids=ids, context=context, prompt_format=prompt_format)
        healed = built.healed
        prompt = healed.prompt_ids
        rules = self.draft_rules(options, extra_stops=self._format(prompt_format)[1] if built.structured else frozenset())
        logits, timings.reused_tokens = self.runner.prefill(prompt, cancelled)  # its forward syncs the device
        timings.prefill_tokens = len(prompt) - timings.reused_tokens
        timings.prefill_s = time.perf_counter() - started
        try:
            hyps = self._run(options, logits, prompt, healed.remainder, rules, cancelled, timings)
        finally:
            self.runner.rewind(len(prompt))
        drafts = to_drafts(hyps, options.k, self.table, prompt, healed.remainder, stop_at_newline=options.stop_at_newline)
        if suffix:  # the token ids stay the model's; the text ends where the suffix begins again
            drafts = [replace(d, text=cut_echo(d.text, suffix)) for d in drafts]
        timings.total_s = time.perf_counter() - started
        return DecodeResult(drafts, timings, options.method, built.info())

    def warm(
        self, prefix: str, options: DecodeOptions, cancelled: CancelCheck | None = None, *, ids: list[int] | None = None,
        suffix: str = "", filename: str | None = None, snippets: Sequence[tuple[str, str]] = (),
        language: str | None = None, prompt_format: str = "auto",
    ) -> int:
        """Prefill the prompt `complete` would for these arguments and draft nothing, so that a
        request there reuses the cache; returns the tokens run. Cancelled between chunks."""
        context = Context(suffix, filename, tuple(snippets), language)
        prompt = self.healed_prompt(prefix, healing=options.heal, ids=ids, context=context, prompt_format=prompt_format)
        return len(prompt.prompt_ids) - self.runner.prefill(prompt.prompt_ids, cancelled or never_cancelled)[1]

    def draft_rules(self, options: DecodeOptions, *, extra_stops: frozenset[int] = frozenset()) -> DraftRules:
        """The stop, healing and placement rules every draft of a request follows (`extra_stops`:
        the prompt format's end tokens, where the prompt holds its control tokens)."""
        return DraftRules(
            table=self.table, stop_ids=self.stop_ids | extra_stops, stop_at_newline=options.stop_at_newline,
            candidate_device=self.candidate_device,
        )

    def healed_prompt(
        self, prefix: str, *, healing: bool = True, ids: list[int] | None = None, context: Context | None = None,
        prompt_format: str = "auto",
    ) -> HealedPrompt:
        """What the model is fed for `prefix` (or its given token ids), and the text every draft must first re-produce."""
        return self.prompt(prefix, healing=healing, ids=ids, context=context, prompt_format=prompt_format).healed

    def prompt(
        self, prefix: str, *, healing: bool = True, ids: list[int] | None = None, context: Context | None = None,
        prompt_format: str = "auto",
    ) -> Prompt:
        """The healed prompt with its context laid out in the model's format, and its token counts."""
        fmt = self._format(prompt_format)[0]
        prefix_ids = self.encode(prefix) if ids is None else ids
        return build_prompt(fmt, context or Context(), prefix_ids, tokenizer=self.tokenizer, table=self.table,
                            with_bos=self._with_bos, healing=healing)

    def _format(self, prompt_format: str) -> tuple[PromptFormat, frozenset[int]]:
        """The format a `promptFormat` setting means for this tokenizer, and its end tokens (memoised)."""
        if prompt_format not in self._formats:
            fmt = resolve(self.tokenizer, prompt_format)[0]
            self._formats[prompt_format] = (fmt, stop_ids(fmt, self.tokenizer))
        return self._formats[prompt_format]

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
