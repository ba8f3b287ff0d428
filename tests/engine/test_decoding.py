"""Decoding engine on tiny random models of three architectures (fast, no model files)."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
import torch
from tokenizers import AddedToken
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from spd_lsp.engine.decoding.baselines import constrained_logp
from spd_lsp.engine.decoding.drafts import DraftRules, Hypothesis, extension_totals, to_drafts
from spd_lsp.engine.decoding.healing import TokenTable, advance, heal
from spd_lsp.engine.decoding.interpolate import interpolate
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.superposed import superposed_embedding, superposition_weights
from spd_lsp.api import Cancelled, DecodeOptions, DecodeRequest, METHODS
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import LoadedModel
from bench.baselines import register as register_baselines
from tests.tiny_models import WITH_FAST, tiny_model

register_baselines()  # nucleus_batched, the benchmarks' baseline: the engine decodes it where they run it

PREFIX = "for name in names:\n    if name"
RAW = dict(stop_at_newline=False, heal=False, verify_rounds=0)  # the decoder alone, without verification


@pytest.fixture(scope="module", params=WITH_FAST)
def engine(request) -> LocalEngine:
    return LocalEngine(tiny_model(request.param))


def test_spd_with_one_draft_and_no_ngrams_is_greedy(engine: LocalEngine) -> None:
    greedy = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method="greedy", k=1, **RAW)))
    spd = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method="superposed", k=1, alpha=0.0, **RAW)))
    assert spd.drafts[0].token_ids == greedy.drafts[0].token_ids
    assert len(greedy.drafts[0].token_ids) == 10


def test_superposition_weights_are_normalised_draft_probabilities() -> None:
    hyps = [Hypothesis((1,), -0.1), Hypothesis((2,), -1.0), Hypothesis((3,), -2.5)]
    gamma = superposition_weights([hyps, hyps[:2]])  # a request with fewer drafts weighs the missing one 0
    assert gamma.sum(dim=1).tolist() == pytest.approx([1.0, 1.0])
    assert torch.allclose(gamma[0], torch.softmax(torch.tensor([-0.1, -1.0, -2.5]), 0))
    assert torch.allclose(gamma[1], torch.tensor([*torch.softmax(torch.tensor([-0.1, -1.0]), 0).tolist(), 0.0]))


def test_one_hot_superposition_equals_token_id_forward(engine: LocalEngine) -> None:
    """Holds for Gemma too, whose forward scales input embeddings by sqrt(hidden)."""
    runner = engine.runner
    prompt = engine.encode(PREFIX)
    runner.prefill(prompt)
    hyps = [Hypothesis((7,), 0.0), Hypothesis((9,), -math.inf), Hypothesis((11,), -math.inf)]
    by_ids = runner.forward(runner.fork(1), ids=torch.tensor([[7]]))
    by_embedding = runner.forward(runner.fork(1), embeds=superposed_embedding(runner, hyps))
    assert torch.allclose(by_ids, by_embedding, atol=1e-5)


def test_shared_last_tokens_add_their_weights(engine: LocalEngine) -> None:
    runner = engine.runner
    merged = superposed_embedding(runner, [Hypothesis((5,), math.log(0.75)), Hypothesis((6,), math.log(0.25))])
    split = superposed_embedding(
        runner, [Hypothesis((5,), math.log(0.5)), Hypothesis((6,), math.log(0.25)), Hypothesis((5,), math.log(0.25))]
    )
    assert torch.allclose(merged, split, atol=1e-6)


@pytest.mark.parametrize("method", ["superposed", "beam", "nucleus", "nucleus_batched"])
def test_k_distinct_drafts_ranked_by_score(engine: LocalEngine, method: str) -> None:
    result = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method=method, k=3, seed=3, **RAW)))
    texts = [d.text for d in result.drafts]
    assert len(texts) == 3 and len(set(texts)) == 3
    scores = [d.score for d in result.drafts]
    assert scores == sorted(scores, reverse=True)


def test_stop_token_ends_draft(engine: LocalEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    free = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method="greedy", k=1, **RAW))).drafts[0]
    stop = free.token_ids[2]
    monkeypatch.setattr(engine, "stop_ids", frozenset({stop}))  # restores the engine's own set afterwards
    for method in ("greedy", "superposed"):
        stopped = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method=method, k=1, alpha=0.0, **RAW))).drafts[0]
        assert stopped.finished
        assert stopped.token_ids == free.token_ids[: free.token_ids.index(stop) + 1]


def test_interpolation_matches_hand_computation() -> None:
    lm = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1]]))
    ngram = torch.tensor([[0.25, 0.0, 0.5], [0.0, 0.0, 0.0]])
    alpha, log_delta = 0.4, -200.0
    mixed = interpolate(lm, ngram, alpha, log_delta)
    assert mixed[0, 0].item() == pytest.approx(0.6 * math.log(0.5) + 0.4 * math.log(0.25), abs=1e-5)
    assert mixed[0, 1].item() == -math.inf  # no support while its row has some: dropped
    assert mixed[0, 2].item() == pytest.approx(0.6 * math.log(0.2) + 0.4 * math.log(0.5), abs=1e-5)
    # A row without any n-gram support keeps its LM candidates, penalised by delta.
    assert mixed[1].tolist() == pytest.approx([0.6 * math.log(p) - 200.0 for p in (0.6, 0.3, 0.1)], abs=1e-4)
    assert torch.equal(interpolate(lm, ngram, 0.0, log_delta), lm)
    # A candidate the LM rules out stays out, even when only the n-grams count (alpha 1).
    ruled_out = torch.tensor([[0.0, float("-inf")]])
    assert interpolate(ruled_out, torch.tensor([[0.5, 0.5]]), 1.0, log_delta)[0].tolist() == pytest.approx([math.log(0.5), -math.inf])
    # The shipped rule: an unseen candidate is not vetoed, it pays log delta.
    soft = interpolate(lm, ngram, alpha, -1.5, drop_unsupported=False)
    assert soft[0, 1].item() == pytest.approx(0.6 * math.log(0.3) - 1.5, abs=1e-5)
    assert soft[0, 0].item() == pytest.approx(mixed[0, 0].item())


class TableNgrams:
    """An n-gram source that supports exactly one continuation token after any context."""

    def __init__(self, favourite: int):
        self.favourite = favourite

    def p_ngram(self, contexts, candidates, weights):
        return [[1.0 if c == self.favourite else 0.0 for c in row] for row in candidates]


def test_ngram_source_steers_drafts(engine: LocalEngine) -> None:
    plain = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method="superposed", k=3, **RAW)))
    favourite = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method="greedy", k=1, **RAW))).drafts[0].token_ids[0]
    engine.set_ngrams(TableNgrams(favourite))
    try:
        steered = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method="superposed", k=3, alpha=0.9, drop_unsupported=True, **RAW)))
    finally:
        engine.set_ngrams(None)
    assert all(d.token_ids[0] == favourite for d in steered.drafts)
    assert steered.timings.ngram_s > 0 and plain.timings.ngram_s == 0


def test_healing_backs_up_last_token_and_drafts_reproduce_it(engine: LocalEngine) -> None:
    ids = engine.encode(PREFIX)
    healed = heal(ids, engine.table)
    assert healed.prompt_ids == ids[:-1]
    assert PREFIX.endswith(healed.remainder) and healed.remainder
    for method in ("superposed", "greedy", "beam"):
        result = engine.complete(DecodeRequest(PREFIX, DecodeOptions(method=method, k=3, stop_at_newline=False)))
        for draft in result.drafts:
            full = engine.table.decode(draft.token_ids, healed.prompt_ids)
            assert full.startswith(healed.remainder)
            assert full[len(healed.remainder):].rstrip("\ufffd") == draft.text


def test_healing_tokens_cover_part_or_all_of_the_remainder(engine: LocalEngine) -> None:
    texts = engine.table.texts
    expected = {i for i, text in enumerate(texts) if text and (text.startswith("nam") or "nam".startswith(text))}
    found = engine.table.consistent_with("nam").tolist()
    assert sorted(found) == sorted(expected)
    assert {len(texts[i]) > 3 for i in found} == {True, False}  # both kinds: 'name' covers it all, 'n' part
    assert advance("name", "na") == ("me", "")
    assert advance("na", "names") == ("", "mes")


def test_prefix_cache_is_reused_and_exact(engine: LocalEngine) -> None:
    options = DecodeOptions.of(method="superposed", k=3, **RAW)
    engine.runner.rewind(0)
    cold = engine.complete(DecodeRequest(PREFIX + " in", options))
    warm_first = engine.complete(DecodeRequest(PREFIX, options))
    warm = engine.complete(DecodeRequest(PREFIX + " in", options))
    assert warm.timings.reused_tokens > 0 and warm_first.timings.reused_tokens > 0
    assert [d.token_ids for d in warm.drafts] == [d.token_ids for d in cold.drafts]
    assert [d.score for d in warm.drafts] == pytest.approx([d.score for d in cold.drafts], abs=1e-4)


def test_cancellation_stops_decoding_and_leaves_the_cache_usable(engine: LocalEngine) -> None:
    options = DecodeOptions.of(method="superposed", k=3, **RAW)
    before = engine.complete(DecodeRequest(PREFIX, options))
    calls = iter([False, False, True])
    with pytest.raises(Cancelled):
        engine.complete(DecodeRequest(PREFIX, options), cancelled=lambda: next(calls))
    after = engine.complete(DecodeRequest(PREFIX, options))
    assert [d.token_ids for d in after.drafts] == [d.token_ids for d in before.drafts]


def test_resets_refeed_the_best_draft_and_keep_k_drafts(engine: LocalEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    prefills: list[list[int]] = []
    prefill = engine.runner.prefill
    monkeypatch.setattr(engine.runner, "prefill", lambda ids, *rest: prefills.append(list(ids)) or prefill(ids, *rest))
    options = DecodeOptions.of(method="superposed", k=3, max_tokens=12, reset_every=4, **RAW)
    result = engine.complete(DecodeRequest(PREFIX, options))
    prompt = prefills[0]
    # The prompt, then a reset after steps 4 and 8 (none after the last step), each the prompt + a draft so far.
    assert [len(ids) - len(prompt) for ids in prefills] == [0, 4, 8]
    assert all(ids[: len(prompt)] == prompt for ids in prefills)
    assert len(result.drafts) == 3
    assert all(len(d.token_ids) == 12 for d in result.drafts)
    # With one draft, superposition is the token itself: resets must not change what greedy picks.
    one = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method="superposed", k=1, max_tokens=12, reset_every=4, alpha=0.0, **RAW)))
    greedy = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method="greedy", k=1, max_tokens=12, **RAW)))
    assert one.drafts[0].token_ids == greedy.drafts[0].token_ids


def test_timings_are_reported(engine: LocalEngine) -> None:
    t = engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(method="superposed", k=3, **RAW))).timings
    assert t.steps == 9 and t.prefill_s > 0 and t.model_s > 0 and t.total_s >= t.prefill_s + t.model_s


def test_unknown_method_is_a_clear_error(engine: LocalEngine) -> None:
    with pytest.raises(ValueError, match="unknown decoding method"):
        engine.complete(DecodeRequest(PREFIX, DecodeOptions(method="sampling")))


def test_draft_ends_before_a_character_cut_short_by_the_token_limit(engine: LocalEngine) -> None:
    emoji = engine.encode("😀")
    assert len(emoji) > 1  # byte-level: the emoji spans tokens
    tokens = tuple(engine.encode("x = '😀' + '") + emoji[:-1])
    drafts = to_drafts([Hypothesis(tokens, -1.0)], 1, engine.table, engine.encode("a"), "", stop_at_newline=True)
    assert drafts[0].text == "x = '😀' + '"


class TensorDevices(TorchFunctionMode):
    """Records the device of every tensor a torch function returns inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[str, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", str(func))
        self.made += [(name, t.device.type) for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
        return result


def test_decode_steps_keep_their_tensors_on_the_logits_device() -> None:
    """No GPU here: `meta` stands in for CUDA. A CPU tensor made inside a step is the device
    mix that raised "indices should be either on cpu or on the same device" on CUDA."""
    loaded = tiny_model("llama")
    vocab = loaded.model.get_input_embeddings().weight.shape[0]
    runner = ModelRunner(loaded.model.to("meta"), torch.device("meta"))
    rules = DraftRules(
        table=TokenTable(loaded.tokenizer, vocab), stop_ids=frozenset({loaded.tokenizer.eos_token_id}),
        stop_at_newline=True, candidate_device=None,
    )
    hyps = [Hypothesis((5,), -0.5, remainder="nam"), Hypothesis((6,), -1.0)]
    with TensorDevices() as devices:
        for lm_logp in (torch.zeros(1, vocab, device="meta"), torch.zeros(2, vocab, device="meta")):
            cand_ids, cand_logp = rules.propose(lm_logp, hyps, 6)
            extension_totals(hyps, interpolate(cand_logp, torch.zeros_like(cand_logp), 0.5, -1.5))
            constrained_logp(lm_logp, hyps, rules)
        superposed_embedding(runner, hyps)
    assert devices.made and {device for _, device in devices.made} == {"meta"}, devices.made


SPECIAL = "<jupyter_start>"


@pytest.fixture(scope="module")
def special_engine() -> LocalEngine:
    """A model that always prefers an added special token, as SmolLM2 has them (not in all_special_ids)."""
    loaded = tiny_model("llama")
    tokenizer = copy.deepcopy(loaded.tokenizer)
    tokenizer.add_tokens([AddedToken(SPECIAL, special=True)])
    special = tokenizer.convert_tokens_to_ids(SPECIAL)
    loaded.model.resize_token_embeddings(len(tokenizer))
    loaded.model.get_output_embeddings().register_forward_hook(
        lambda module, inputs, logits: logits.index_fill(-1, torch.tensor([special]), 100.0)
    )
    return LocalEngine(LoadedModel(**{**vars(loaded), "tokenizer": tokenizer}))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("heal_prefix", [False, True])
def test_drafts_never_contain_special_tokens(special_engine: LocalEngine, method: str, heal_prefix: bool) -> None:
    special = special_engine.tokenizer.convert_tokens_to_ids(SPECIAL)
    assert special not in special_engine.tokenizer.all_special_ids  # as SmolLM2's <jupyter_start>
    special_engine.set_ngrams(TableNgrams(special))  # the n-grams back only the special token
    try:
        # Verification off: with alpha = 1 the drafts follow the n-grams alone, and the random model finds
        # them implausible from their first token, so verification (rightly) shows none; the decoding's own
        # candidates are what this checks.
        options = DecodeOptions.of(method=method, k=3, alpha=1.0, seed=0, stop_at_newline=False, heal=heal_prefix,
                                verify_rounds=0)
        drafts = special_engine.complete(DecodeRequest(PREFIX, options)).drafts
        verified = special_engine.complete(DecodeRequest(PREFIX, replace(options, verify_rounds=1))).drafts
    finally:
        special_engine.set_ngrams(None)
    assert drafts
    for draft in drafts + verified:
        assert special not in draft.token_ids and SPECIAL not in draft.text
