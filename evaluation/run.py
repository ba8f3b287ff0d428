"""Drafts for every (configuration, position) from the in-process engine, scored."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Callable, Sequence

from ngram_db import NgramSource
from spd_lsp.settings import CPU_PREFIX_TOKENS
from spd_lsp.cursor import Cursor, fit_prefix
from spd_lsp.engine.decoding.drafts import DraftRules, to_drafts
from spd_lsp.engine.decoding.healing import HealedPrompt
from spd_lsp.api import DecodeOptions, DecodeRequest, DecodeResult
from spd_lsp.engine.decoding.verify import closes_drafts, replay, verify
from spd_lsp.engine.local import LocalEngine
from evaluation.blend import blended
from evaluation.evaluator import PerplexityEvaluator
from evaluation.metrics import RequestScore, score_request
from evaluation.positions import Position
from spd_lsp.fit.edits import Fit, finalize
from spd_lsp.languages import language_of
from spd_lsp.session.session import token_spans


@dataclass(frozen=True)
class Config:
    """One row of the results: a decoding method, its options and the n-grams it sees."""

    name: str
    options: DecodeOptions
    ngrams: str | None = None  # key into the sources passed to `evaluate`; None = no n-grams


@dataclass
class ConfigResult:
    config: Config
    scores: list[RequestScore] = field(default_factory=list)
    drafts: list[list[str]] = field(default_factory=list)


def standard_configs(k: int = 3, base: DecodeOptions | None = None) -> list[Config]:
    """The methods of the results table, all from the same defaults."""
    o = base or DecodeOptions()
    return [
        Config("SPD + workspace n-grams", replace(o, method="superposed", k=k), "workspace"),
        Config("SPD + base store only", replace(o, method="superposed", k=k), "base"),
        Config("SPD, no n-grams (α = 0)", replace(o, method="superposed", k=k), None),
        Config("greedy", replace(o, method="greedy", k=1), None),
        Config(f"nucleus × {k} (sequential)", o.but(method="nucleus", k=k, seed=0), None),
        Config(f"beam {k}", replace(o, method="beam", k=k), None),
    ]


def fitted(positions: Sequence[Position], tokenizer: Any, budget: int = CPU_PREFIX_TOKENS) -> list[Position]:
    """Prefixes cut as the server cuts them, so in-process and LSP runs see the same prompt."""
    spans = token_spans(tokenizer)
    return [replace(p, prefix=fit_prefix(p.prefix, spans, budget)) for p in positions]


def complete(engine: LocalEngine, position: Position, options: DecodeOptions) -> RequestScore:
    """Score the drafts as the server would show them (fitted to the text after the cursor)."""
    return scored(engine, position, options, engine.complete(DecodeRequest(position.prefix, options)))


def scored(
    engine: LocalEngine, position: Position, options: DecodeOptions, result: DecodeResult, known: dict | None = None,
    *, healed: HealedPrompt | None = None,
) -> RequestScore:
    """`known`: blend flags of the rows already judged at this position (evaluation/blend.py); `healed`: the
    prompt the drafts continued where it held context besides the prefix."""
    cursor = Cursor(position.prefix + position.suffix, len(position.prefix))
    # finalize and blended fit the same drafts: each costs up to MAX_SYNTAX_CHECKS parses, so once
    fit = cache(Fit(cursor, language_of(str(position.path)), multiline=not options.stop_at_newline))
    drafts = finalize((d.text for d in result.drafts), fit, options.k)
    t = result.timings
    score = score_request(drafts, position.target, 1000 * (t.total_s - t.prefill_s), 1000 * t.total_s)
    score.verify_ms = 1000 * t.verify_s
    score.blended = blended(engine, position.prefix, fit, options, result.drafts, drafts, known=known, healed=healed)
    score.drafts = drafts
    return score


def unverified(options: DecodeOptions) -> DecodeOptions:
    """The options with every verification setting at its default (verification off)."""
    defaults = DecodeOptions().flat()
    return options.but(**{**{name: value for name, value in defaults.items() if name.startswith("verify_")},
                          "verify_rounds": 0})


def verified(engine: LocalEngine, prefix: str, options: DecodeOptions, plain: DecodeResult) -> DecodeResult:
    """SPD + verification from a plain SPD run's drafts at the same prompt (decoding/verify.py on its cache).

    What superposed_decode's verify hook would return, without decoding again: one SPD run serves every
    verification variant of a study whose pass runs every step (`last_token="step"`; one that leaves the drafts' last
    token to verification runs a pass of its own, `_answer`). Its time is the SPD run's plus the verification's.
    """
    healed = engine.prompt(DecodeRequest(prefix, options)).healed
    prompt = healed.prompt_ids
    rules = DraftRules(table=engine.table, stop_ids=engine.stop_ids, stop_at_newline=options.stop_at_newline,
                       candidate_device=engine.candidate_device)
    hyps = [replace(replay(rules, healed.remainder, tuple(d.token_ids)), score=d.score * max(1, len(d.token_ids)))
            for d in plain.drafts]
    timings = replace(plain.timings, verify_s=0.0)
    logits, _ = engine.runner.prefill(prompt)  # the prompt is cached: nothing to run
    try:
        hyps = verify(engine.runner, logits, prompt, healed.remainder, hyps, rules, options, engine.ngrams, timings)
    finally:
        engine.runner.rewind(len(prompt))
    timings.total_s += timings.verify_s
    drafts = to_drafts(hyps, options.k, engine.table, prompt, healed.remainder, stop_at_newline=options.stop_at_newline)
    return DecodeResult(drafts, timings, options.method)


def _answer(
    engine: LocalEngine, position: Position, options: DecodeOptions, plain: dict[str, DecodeResult] | None
) -> DecodeResult:
    """The engine's drafts; with `plain`, superposed runs at a position share one plain run, verified per variant."""
    if options.method != "superposed" or plain is None or closes_drafts(options, ""):  # a pass of its own
        return engine.complete(DecodeRequest(position.prefix, options))
    base = unverified(options)
    if repr(base) not in plain:  # options hold a dict: keyed by their text
        plain[repr(base)] = engine.complete(DecodeRequest(position.prefix, base))
    return verified(engine, position.prefix, options, plain[repr(base)]) if options.verify_rounds else plain[repr(base)]


def evaluate(
    engine: LocalEngine,
    configs: Sequence[Config],
    positions: Sequence[Position],
    sources: dict[str, NgramSource],
    evaluator: PerplexityEvaluator | None = None,
    progress: Callable[[int, int], None] | None = None,
    *,
    share_spd: bool = False,
) -> list[ConfigResult]:
    """Position-major, so every method at a position reuses the one prefill of its prompt.

    `share_spd`: SPD configurations differing only in verification share one plain SPD run per
    position (the study); otherwise every configuration runs exactly as the server would.
    """
    results = [ConfigResult(c) for c in configs]
    for index, position in enumerate(positions):
        plain: dict[str | None, dict[str, DecodeResult]] = {}  # per n-gram source: plain SPD runs at this position
        judged: dict[bool, dict] = {}  # per healing setting: blend flags of the rows judged at this position
        for result in results:
            engine.set_ngrams(sources[result.config.ngrams] if result.config.ngrams else None)
            options = result.config.options
            shared = plain.setdefault(result.config.ngrams, {}) if share_spd else None
            answered = _answer(engine, position, options, shared)
            score = scored(engine, position, options, answered, judged.setdefault(options.experimental.heal, {}))
            result.drafts.append(score.drafts)
            result.scores.append(score)
        if evaluator is not None:
            everything = [d for r in results for d in r.drafts[-1]]
            ppl = iter(evaluator.perplexities(position.prefix, everything))
            for result in results:
                result.scores[-1].perplexity = [next(ppl) for _ in result.drafts[-1]]
        if progress:
            progress(index + 1, len(positions))
    engine.set_ngrams(None)
    return results
