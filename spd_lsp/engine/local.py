"""The decoding engine: prompt in, ranked drafts out, for every method.

Owns the model runner (with its reusable prompt KV cache), the token table used
for healing, and the n-gram source. Not thread-safe: one worker calls it.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from ngram_db import NgramSource
from spd_lsp.api import CancelCheck, DecodeRequest, DecodeResult, Draft, METHOD, Timings, never_cancelled
from spd_lsp.engine.decoding.drafts import DraftRules, Hypothesis, to_drafts
from spd_lsp.engine.decoding.healing import TokenTable
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.methods import check_method, final_drafts, seeded, start_state
from spd_lsp.engine.decoding.placement import CPU
from spd_lsp.engine.decoding.stepping import run_alone
from spd_lsp.engine.fast.compile import serving
from spd_lsp.engine.memory import give_back, when_idle
from spd_lsp.engine.model import LoadedModel
from spd_lsp.engine.prompt.build import Prompt, build_prompt, stop_ids
from spd_lsp.engine.prompt.echo import cut_echo
from spd_lsp.engine.prompt.formats import PromptFormat, resolve


class LocalEngine:
    """The `spd_lsp.api.EngineLike` in this process."""

    def __init__(self, loaded: LoadedModel, ngrams: NgramSource | None = None):
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer
        self.runner = ModelRunner(loaded.model, loaded.device)
        vocab_size = loaded.model.get_input_embeddings().num_embeddings
        self.table = TokenTable(self.tokenizer, vocab_size)
        self.stop_ids = frozenset(_eos_ids(loaded))
        self._formats: dict[str, tuple[PromptFormat, frozenset[int]]] = {}  # per promptFormat setting
        self.candidate_device: torch.device | None = CPU  # where each step's candidates live (placement.py)
        self.ngrams = ngrams
        self._warm_up()

    def _warm_up(self) -> None:
        """One tiny forward and a decode step so the first real request does not pay the kernels' first-call set-up
        (on the fast path: the step's compile, logged with its time). Not where the model waits for our kernel
        library (a first start of a large model of blocks: `FastBackend.waits_for_library`): that would hold the
        engine's start until the library is built."""
        fast = self.runner.fast
        if fast is not None and fast.waits_for_library and not fast.prepared.is_set():
            return
        self.runner.prefill(self.encode("def f(x):\n    return x\n") or [0, 0])
        self.runner.forward(self.runner.cache, embeds=self.runner.embed(torch.tensor([[0]])))
        self.runner.rewind(0)
        give_back()  # the load's transients (a tokenizer's parse, the blocks read) off the resident memory

    def set_ngrams(self, ngrams: NgramSource | None) -> None:
        self.ngrams = ngrams

    def close(self) -> None:
        """Nothing to release: the model lives as long as the process."""

    def link(self) -> dict[str, object]:
        return {"address": None, "connected": None, "failures": 0}  # no link: the model is here

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    @serving()  # a background compile of this process waits for it (engine/fast/compile.py)
    def complete(self, request: DecodeRequest, cancelled: CancelCheck | None = None) -> DecodeResult:
        """Drafts continuing `request.prefix` in its context (suffix, path, snippets, language, laid out by
        its prompt format); drafts stop where they start reproducing the suffix. `result.prompt` says what went in."""
        options = request.options
        check_method(options)
        cancelled = cancelled or never_cancelled
        started = time.perf_counter()
        timings = Timings()
        built = self.prompt(request)
        prompt = built.healed.prompt_ids
        rules = self.draft_rules(request, built)
        logits, timings.reused_tokens = self.runner.prefill(prompt, cancelled)  # its forward syncs the device
        timings.prefill_tokens = len(prompt) - timings.reused_tokens
        timings.prefill_s = time.perf_counter() - started
        try:
            hyps = self._run(request, built, logits, rules, cancelled, timings)
        finally:
            self.runner.rewind(len(prompt))
        drafts = self.drafts(hyps, request, built)
        timings.total_s = time.perf_counter() - started
        when_idle()  # the request's transients given back once no other follows
        return DecodeResult(drafts, timings, options.method, built.info())

    @serving()
    def warm(self, request: DecodeRequest, cancelled: CancelCheck | None = None) -> int:
        """Prefill the prompt `complete` would for `request` and draft nothing, so that a request there
        reuses the cache; returns the tokens run. Cancelled between chunks."""
        prompt = self.prompt(request).healed.prompt_ids
        return len(prompt) - self.runner.prefill(prompt, cancelled or never_cancelled)[1]

    def draft_rules(self, request: DecodeRequest, built: Prompt) -> DraftRules:
        """The stop, healing and placement rules every draft of `request` follows (with the prompt format's
        end tokens where the prompt holds its control tokens)."""
        extra = self._format(request.prompt_format)[1] if built.structured else frozenset()
        return DraftRules(
            table=self.table, stop_ids=self.stop_ids | extra, stop_at_newline=request.options.stop_at_newline,
            candidate_device=self.candidate_device,
        )

    def drafts(self, hyps: list[Hypothesis], request: DecodeRequest, built: Prompt) -> list[Draft]:
        """The k best of a request's final hypotheses as drafts, each cut where it reproduces the suffix."""
        options, healed = request.options, built.healed
        drafts = to_drafts(hyps, options.k, self.table, healed.prompt_ids, healed.remainder,
                           stop_at_newline=options.stop_at_newline)
        suffix = request.context.suffix
        if suffix:  # the token ids stay the model's; the text ends where the suffix begins again
            drafts = [replace(d, text=cut_echo(d.text, suffix)) for d in drafts]
        return drafts

    def prompt(self, request: DecodeRequest) -> Prompt:
        """The healed prompt with its context laid out in the request's format, and its token counts."""
        fmt = self._format(request.prompt_format)[0]
        prefix_ids = self.encode(request.prefix) if request.ids is None else list(request.ids)
        return build_prompt(fmt, request.context, prefix_ids, tokenizer=self.tokenizer, table=self.table,
                            with_bos=self._with_bos, healing=request.options.experimental.heal)

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
        self, request: DecodeRequest, built: Prompt, logits: torch.Tensor, rules: DraftRules, cancelled: CancelCheck,
        timings: Timings,
    ) -> list[Hypothesis]:
        """The request's method, alone: one step state to the end (`decoding/methods.py`), or the k
        sequential passes of an unbatched method (nucleus)."""
        options, runner, healed = request.options, self.runner, built.healed
        prompt = healed.prompt_ids

        def start(generator: torch.Generator | None = None) -> object:
            return start_state(options, logits, prompt, healed.remainder, rules, self.ngrams, cancelled=cancelled,
                               timings=timings, generator=generator)

        if METHOD[options.method].batched:
            state = start()
            run_alone(runner, state)
            return final_drafts(state, runner)
        generator, drafts = seeded(options, runner.device), []
        for _ in range(options.k):
            state = start(generator)
            run_alone(runner, state)
            drafts += state.drafts()
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
