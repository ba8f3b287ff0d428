"""Repair by continuation (verify_repair="continue") on tiny random models: a repaired draft is
the model's greedy decoding from its verified prefix + the model's choice, exactly."""

from __future__ import annotations

import pytest
import torch

from spd_lsp.engine.decoding.continuation import RaggedRows, continue_greedily
from spd_lsp.engine.decoding.drafts import DraftRules, Hypothesis
from spd_lsp.api import Cancelled, DecodeOptions, DecodeRequest, Timings
from spd_lsp.engine.decoding.verify import replay, run_rows, verify
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.batcher import BatchJob, Batcher
from tests.tiny_models import LLAMA_BACKENDS, WITH_FAST, tiny_model

PREFIX = "for name in names:\n    if name"
MAX_TOKENS = 8
CONTINUE = {"verify_rounds": 1, "verify_repair": "continue", "verify_first": "rank", "verify_gate": None,
            "max_tokens": MAX_TOKENS}


@pytest.fixture(scope="module", params=LLAMA_BACKENDS)
def engine(request) -> LocalEngine:
    torch.set_num_threads(1)  # one summation order: padded batch rows and a plain forward agree exactly
    return LocalEngine(tiny_model(request.param))


def _rules(engine: LocalEngine) -> DraftRules:
    return DraftRules(table=engine.table, stop_ids=frozenset(), stop_at_newline=False)  # rows keep their length


@torch.inference_mode()
def _next_logp(engine: LocalEngine, ids: list[int]) -> torch.Tensor:
    """The model's next-token log p after `ids` (no special tokens), from one cache-less forward."""
    logits = engine.loaded.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
    return torch.log_softmax(_rules(engine).without_special(logits), dim=-1)


def _greedy(engine: LocalEngine, ids: list[int], n: int) -> list[int]:
    out = list(ids)
    for _ in range(n):
        out.append(int(_next_logp(engine, out).argmax()))
    return out[len(ids):]


def _ranked(engine: LocalEngine, ids: list[int], rank: int) -> int:
    """The token the model ranks `rank`-th (-1: last) among those a draft may hold."""
    logp = _next_logp(engine, ids)
    order = logp.argsort(descending=True)
    return int(order[torch.isfinite(logp[order])][rank])


def _verify(engine: LocalEngine, rows: list[list[int]], cancelled=None, **options) -> list[Hypothesis]:
    prompt = engine.encode(PREFIX)
    logits, _ = engine.runner.prefill(prompt)
    hyps = [replay(_rules(engine), "", tuple(r)) for r in rows]
    timings = Timings()
    out = verify(engine.runner, logits, prompt, "", hyps, _rules(engine), DecodeOptions.of(**{**CONTINUE, **options}),
                 None, timings, cancelled=cancelled)
    assert timings.verify_s > 0
    assert engine.runner.cache.get_seq_length() == len(prompt)  # the prompt cache is untouched
    return out


def _drafts(engine: LocalEngine) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """Three drafts with a token the model ranks last at positions 1, 4 and never, and what continuation
    must make of them: the prefix before it, the model's choice there, then greedy up to MAX_TOKENS."""
    prompt = engine.encode(PREFIX)
    second = [_ranked(engine, prompt, 1)]  # plausible, not greedy's: the continuation differs from greedy
    third = [_ranked(engine, prompt, 2)] + _greedy(engine, prompt + [_ranked(engine, prompt, 2)], 3)
    rows, expected = [], []
    for head in (second, third):
        worst = _ranked(engine, prompt + head, -1)
        rows.append(head + [worst] + [worst] * (MAX_TOKENS - len(head) - 1))
        repaired = head + [int(_next_logp(engine, prompt + head).argmax())]
        expected.append(repaired + _greedy(engine, prompt + repaired, MAX_TOKENS - len(repaired)))
    plausible = _greedy(engine, prompt, MAX_TOKENS)
    return prompt, rows + [plausible], expected + [plausible]


def test_a_continued_draft_is_greedy_decoding_from_its_verified_prefix_and_the_models_choice(engine: LocalEngine) -> None:
    _, rows, expected = _drafts(engine)
    # repaired prefixes of 2 and 5 tokens: the batch is ragged
    out = _verify(engine, rows, verify_top=5, verify_log_ratio=-50.0)
    assert sorted(h.tokens for h in out) == sorted(tuple(e) for e in expected)
    cut = _verify(engine, rows, verify_top=5, verify_log_ratio=-50.0, verify_repair="jacobi")
    assert sorted(h.tokens for h in cut) == sorted(tuple(r) for r in (rows[0][:1], rows[1][:4], rows[2]))


@pytest.mark.parametrize("architecture", WITH_FAST)  # rotary and absolute positions, sliding windows
@torch.inference_mode()
def test_continued_rows_see_exactly_what_a_plain_forward_of_their_prefix_sees(architecture: str) -> None:
    """Rows continue on the verification's own key/values: each sees only its prefix, at its positions."""
    engine = LocalEngine(tiny_model(architecture))
    rules = _rules(engine)
    prompt = engine.encode(PREFIX)
    logits, _ = engine.runner.prefill(prompt)
    rows = [tuple(_greedy(engine, prompt, 4)), tuple([_ranked(engine, prompt, 3)] + _greedy(engine, prompt, 5))]
    cut = [1, 4]  # each row continues from its first 1 and 4 tokens: a ragged batch
    kept = run_rows(engine.runner, logits, engine.runner.cache, rows, keep=True)
    assert engine.runner.cache.get_seq_length() == len(prompt)  # the prompt cache is cropped back
    kept.cache.reorder_cache(torch.zeros(len(rows), dtype=torch.long))  # a row each, the tree's
    ragged = RaggedRows(engine.runner, kept.cache, len(prompt), [c[:n] for c, n in zip(kept.columns, cut)])
    starts = [replay(rules, "", row[:n]) for row, n in zip(rows, cut)]
    first = torch.stack([x[n] for x, n in zip(kept.logits, cut)])
    continued = continue_greedily(engine.runner, ragged, starts, first, "", rules, DecodeOptions(max_tokens=MAX_TOKENS),
                                  lambda: False)
    for row, n, (hyp, seen) in zip(rows, cut, continued):
        assert len(hyp.tokens) == MAX_TOKENS and hyp.tokens[:n] == row[:n]
        assert list(hyp.tokens[n:]) == _greedy(engine, prompt + list(row[:n]), MAX_TOKENS - n)
        for at in range(n, MAX_TOKENS):  # the logits each new token was chosen from, position by position
            plain = engine.loaded.model(input_ids=torch.tensor([prompt + list(hyp.tokens[:at])])).logits[0, -1]
            assert seen[at - n].tolist() == pytest.approx(plain.float().tolist(), abs=1e-4)
    assert engine.runner.cache.get_seq_length() == len(prompt)


def test_a_draft_without_an_implausible_token_is_untouched(engine: LocalEngine) -> None:
    prompt = engine.encode(PREFIX)
    plausible = [_ranked(engine, prompt, 1)] + [_ranked(engine, prompt + [_ranked(engine, prompt, 1)], 2)]
    out = _verify(engine, [plausible], verify_top=5, verify_log_ratio=-50.0)
    assert [h.tokens for h in out] == [tuple(plausible)]  # short, not the greedy choice, yet not continued


def test_continuation_steps_stay_within_max_tokens(engine: LocalEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    _, rows, _ = _drafts(engine)
    forwards = []
    real = engine.runner.forward
    def counted(*args, **kwargs):  # the continuation's steps: the prompt's prefill has no mask
        forwards.append(kwargs.get("attention_mask") is not None)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine.runner, "forward", counted)
    out = _verify(engine, rows, verify_top=5, verify_log_ratio=-50.0, max_tokens=MAX_TOKENS)
    assert max(len(h.tokens) for h in out) == MAX_TOKENS
    # one step per token after the shortest verified prefix (1 token), none after the last token
    assert 0 < sum(forwards) <= MAX_TOKENS - 1 - 1


def test_a_repair_that_rejoins_a_greedy_draft_is_that_draft_without_a_step(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = engine.encode(PREFIX)
    greedy = _greedy(engine, prompt, MAX_TOKENS)
    blend = greedy[:2] + [_ranked(engine, prompt + greedy[:2], -1)] * (MAX_TOKENS - 2)  # greedy's head, a grafted tail
    forwards = []
    real = engine.runner.forward
    monkeypatch.setattr(engine.runner, "forward", lambda *a, **k: forwards.append(k.get("attention_mask")) or real(*a, **k))
    out = _verify(engine, [greedy, blend], verify_top=5, verify_log_ratio=-50.0)
    assert {h.tokens for h in out} == {tuple(greedy)}
    assert all(mask is None for mask in forwards)  # no continuation step ran


def test_continuation_respects_cancellation(engine: LocalEngine) -> None:
    _, rows, _ = _drafts(engine)
    checks = []
    with pytest.raises(Cancelled):
        _verify(engine, rows, verify_top=5, verify_log_ratio=-50.0, cancelled=lambda: checks.append(1) or True)
    assert checks  # the continuation asked before its first step
    assert engine.runner.cache.get_seq_length() == len(engine.encode(PREFIX))


def test_superposed_method_continues_alone_and_in_the_engine_batch(engine: LocalEngine) -> None:
    options = DecodeOptions.of(k=3, max_tokens=MAX_TOKENS, stop_at_newline=False, verify_repair="continue",
                            verify_top=2, verify_log_ratio=-1.0)
    alone = engine.complete(DecodeRequest(PREFIX, options))
    plain = engine.complete(DecodeRequest(PREFIX, DecodeOptions(k=3, max_tokens=MAX_TOKENS, stop_at_newline=False, verify_rounds=0)))
    assert alone.timings.verify_s > 0
    # with a top-2 rule some random-model draft must have been repaired; continuation keeps it long
    assert [d.token_ids for d in alone.drafts] != [d.token_ids for d in plain.drafts]
    scheduler = Batcher(engine)
    try:
        batched = scheduler.submit(BatchJob(DecodeRequest(PREFIX, options), affinity="editor")).result(timeout=120)
    finally:
        scheduler.close()
    assert [(d.text, round(d.score, 4)) for d in batched.drafts] == [(d.text, round(d.score, 4)) for d in alone.drafts]
    assert batched.timings.verify_s > 0


def test_decode_options_refuse_an_unknown_repair() -> None:
    assert DecodeOptions.from_dict({"verify_repair": "continue"}).verify_repair == "continue"
    with pytest.raises(ValueError, match="verify_repair"):
        DecodeOptions.from_dict({"verify_repair": "restart"})


def test_a_batched_request_cancelled_while_continuing_is_cancelled(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's scheduler verifies a request as it leaves the batch: its cancel still reaches the steps."""
    import spd_lsp.engine.decoding.verify as verify_module

    options = DecodeOptions.of(k=3, max_tokens=MAX_TOKENS, stop_at_newline=False, verify_repair="continue",
                            verify_top=2, verify_log_ratio=-1.0)
    job = BatchJob(DecodeRequest(PREFIX, options), affinity="editor")
    real = verify_module.continue_greedily

    def cancel_then_continue(*args, **kwargs):
        job.cancel()  # the user typed on while the drafts were being continued
        return real(*args, **kwargs)

    monkeypatch.setattr(verify_module, "continue_greedily", cancel_then_continue)
    scheduler = Batcher(engine)
    try:
        with pytest.raises(Cancelled):
            scheduler.submit(job).result(timeout=120)
    finally:
        scheduler.close()
