"""Verification of superposed drafts on tiny random models: exact scores, repair, cut, gate."""

from __future__ import annotations

import pytest
import torch

from spd_lsp.engine.decoding.drafts import DraftRules, Hypothesis
from spd_lsp.api import DecodeOptions, DecodeRequest, Timings
from spd_lsp.engine.decoding.verify import judge, ranked, replay, verify
from spd_lsp.engine.local import LocalEngine
from tests.tiny_models import LLAMA_BACKENDS, tiny_model

PREFIX = "for name in names:\n    if name"


@pytest.fixture(scope="module", params=LLAMA_BACKENDS)
def engine(request) -> LocalEngine:
    return LocalEngine(tiny_model(request.param))


def _rules(engine: LocalEngine) -> DraftRules:
    return DraftRules(table=engine.table, stop_ids=frozenset(), stop_at_newline=False)  # no stops: rows keep their length


@torch.inference_mode()
def _plain_logp(engine: LocalEngine, ids: list[int]) -> torch.Tensor:
    """log p of every next token after each position, from one cache-less forward."""
    return torch.log_softmax(engine.loaded.model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)


def _greedy(engine: LocalEngine, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(_plain_logp(engine, ids)[-1].argmax()))
    return ids[len(prompt):]


def _worst(engine: LocalEngine, ids: list[int]) -> int:
    return int(_plain_logp(engine, ids)[-1].argmin())


def _assert_plain(engine: LocalEngine, prompt: list[int], rows: list[tuple[int, ...]], verdicts: list) -> None:
    """Each row's verdict is that of a cache-less forward of the prompt and the row alone."""
    for row, verdict in zip(rows, verdicts):
        full = _plain_logp(engine, prompt + list(row))
        expected = torch.log_softmax(_rules(engine).without_special(full[len(prompt) - 1 : -1]), dim=-1)
        want = expected.gather(1, torch.tensor(row)[:, None]).squeeze(1)
        assert verdict.logp == pytest.approx(want.tolist(), abs=1e-4)
        assert list(verdict.choice) == expected.argmax(dim=-1).tolist()
        assert list(verdict.rank) == [int((e > w).sum()) for e, w in zip(expected, want)]


def test_verification_logprobs_equal_a_plain_forward(engine: LocalEngine) -> None:
    prompt = engine.encode(PREFIX)
    logits, _ = engine.runner.prefill(prompt)
    rows = [tuple(engine.encode(" in ('a', 'b'):")), tuple(engine.encode(".endswith")), tuple(engine.encode(" ="))]
    _assert_plain(engine, prompt, rows, judge(engine.runner, logits, engine.runner.cache, rows, "", _rules(engine)))
    assert engine.runner.cache.get_seq_length() == len(prompt)  # the prompt cache is cropped back


def _verify(engine: LocalEngine, rows: list[list[int]], **options) -> list[Hypothesis]:
    prompt = engine.encode(PREFIX)
    logits, _ = engine.runner.prefill(prompt)
    hyps = [replay(_rules(engine), "", tuple(r)) for r in rows]
    timings = Timings()
    options = DecodeOptions.of(**{"verify_first": "rank", "verify_score": "mean", **options})
    out = verify(engine.runner, logits, prompt, "", hyps, _rules(engine), options, None, timings)
    assert timings.verify_s > 0
    assert engine.runner.cache.get_seq_length() == len(prompt)
    return out


def test_repair_replaces_the_first_implausible_token_by_the_models_choice(engine: LocalEngine) -> None:
    prompt = engine.encode(PREFIX)
    good = _greedy(engine, prompt, 2)
    bad = _worst(engine, prompt + good)
    row = good + [bad] + _greedy(engine, prompt + good + [bad], 3)
    choice = int(_plain_logp(engine, prompt + good)[-1].argmax())
    repaired = _verify(engine, [row], verify_rounds=2, verify_gate=None)
    assert len(repaired) == 1
    assert repaired[0].tokens[:3] == (*good, choice)
    cut = _verify(engine, [row], verify_rounds=1, verify_gate=None)
    assert [h.tokens for h in cut] == [tuple(good)]


def test_verified_tokens_are_within_the_models_top_m(engine: LocalEngine) -> None:
    prompt = engine.encode(PREFIX)
    rows = [_greedy(engine, prompt, 5)] + [[_worst(engine, prompt)] + _greedy(engine, prompt, 4)]
    out = _verify(engine, rows, verify_rounds=2, verify_top=2, verify_log_ratio=-50.0, verify_gate=None)
    logits, _ = engine.runner.prefill(prompt)
    rows = [h.tokens for h in out]
    for verdict in judge(engine.runner, logits, engine.runner.cache, rows, "", _rules(engine)):
        assert max(verdict.rank) < 2


def test_gate_returns_fewer_drafts_than_one_the_model_rates_far_below(engine: LocalEngine) -> None:
    prompt = engine.encode(PREFIX)
    good = _greedy(engine, prompt, 4)
    junk = [_worst(engine, prompt)] * 4
    rank_only = {"verify_rounds": 1, "verify_top": None, "verify_log_ratio": float("-inf")}
    both = _verify(engine, [good, junk], **rank_only, verify_gate=None)
    assert len(both) == 2
    gap = both[0].normalised - both[1].normalised  # a random tiny model: small, but positive
    assert gap > 0
    gated = _verify(engine, [junk, good], **rank_only, verify_gate=gap / 2)
    assert [h.tokens for h in gated] == [tuple(good)]


def test_superposed_method_verifies_and_times_it(engine: LocalEngine) -> None:
    options = DecodeOptions.of(k=3, max_tokens=5, verify_rounds=2, verify_top=3, verify_log_ratio=-50.0)
    result = engine.complete(DecodeRequest(PREFIX, options))
    assert result.timings.verify_s > 0
    assert 1 <= len(result.drafts) <= 3
    plain = engine.complete(DecodeRequest(PREFIX, DecodeOptions(k=3, max_tokens=5, verify_rounds=0)))
    assert plain.timings.verify_s == 0


LAX = {"verify_top": None, "verify_log_ratio": float("-inf"), "verify_gate": None}  # judge, but cut nothing


def test_verification_closes_a_draft_left_one_short_with_the_models_choice(engine: LocalEngine) -> None:
    prompt = engine.encode(PREFIX)
    row = _greedy(engine, prompt, 2) + [_worst(engine, prompt + _greedy(engine, prompt, 2))]  # 3 of max_tokens 4
    closed = _verify(engine, [row], verify_rounds=1, verify_first="cut", max_tokens=4, last_token="tree", **LAX)
    choice = int(_rules(engine).without_special(_plain_logp(engine, prompt + row)[-1:]).argmax())
    assert [h.tokens for h in closed] == [(*row, choice)]
    left = _verify(engine, [row], verify_rounds=1, verify_first="cut", max_tokens=4, last_token="step", **LAX)
    assert [h.tokens for h in left] == [tuple(row)]
    full = _verify(engine, [row], verify_rounds=1, verify_first="cut", max_tokens=3, last_token="tree", **LAX)
    assert [h.tokens for h in full] == [tuple(row)]  # at the budget already: nothing to close


def test_superposed_pass_leaves_the_drafts_last_token_to_verification(engine: LocalEngine) -> None:
    base = DecodeOptions.of(k=3, max_tokens=5, stop_at_newline=False, heal=False, verify_rounds=1, **LAX)
    step = engine.complete(DecodeRequest(PREFIX, base.but(last_token="step")))
    tree = engine.complete(DecodeRequest(PREFIX, base.but(last_token="tree")))
    assert tree.timings.steps == step.timings.steps - 1
    prompt = engine.encode(PREFIX)
    rules = _rules(engine)
    for draft in tree.drafts:
        assert len(draft.token_ids) == 5
        *head, last = draft.token_ids
        assert last == int(rules.without_special(_plain_logp(engine, prompt + head)[-1:]).argmax())


def test_a_draft_left_open_inside_the_healed_text_is_still_closed_and_shown(engine: LocalEngine) -> None:
    # Healing re-produces " return" first: after 3 of 4 tokens a draft's text may still be blank, and a blank draft
    # is never shown; left open for verification, it must still be judged and closed (it was dropped: no drafts).
    request = "def add(a, b):\n    return"
    assert engine.prompt(DecodeRequest(request, DecodeOptions())).healed.remainder
    base = DecodeOptions(k=3, max_tokens=4)
    step = engine.complete(DecodeRequest(request, base.but(last_token="step")))
    tree = engine.complete(DecodeRequest(request, base.but(last_token="tree")))
    assert step.drafts and tree.drafts
    assert tree.timings.steps == step.timings.steps - 1


def test_healed_first_tokens_are_judged_among_the_tokens_consistent_with_the_healed_text(engine: LocalEngine) -> None:
    healed = engine.prompt(DecodeRequest("for name in names:\n    if name.endsw")).healed
    assert healed.remainder
    prompt = healed.prompt_ids
    logits, _ = engine.runner.prefill(prompt)
    allowed = engine.table.consistent_with(healed.remainder)
    first = int(allowed[logits[0, allowed].argmax()])
    row = [first] + _greedy(engine, prompt + [first], 2)
    timings = Timings()
    options = DecodeOptions.of(verify_rounds=1, verify_top=1, verify_log_ratio=-50.0, verify_gate=None)
    hyps = [replay(_rules(engine), healed.remainder, tuple(row))]  # the draft as decoding left it
    out = verify(engine.runner, logits, prompt, healed.remainder, hyps, _rules(engine), options, None, timings)
    assert [h.tokens for h in out] == [tuple(row)]


def test_status_reports_the_verification_cost() -> None:
    from spd_lsp.session.session import Stats

    stats = Stats()
    stats.record(0.5, Timings(prefill_s=0.1, model_s=0.2, verify_s=0.05, total_s=0.4))
    assert stats.last()["verifyMs"] == 50.0
    assert "verify" in stats.summary()["latencyMs"]


def test_keep_leaves_the_top_draft_first_and_whole_and_ranks_the_rest_by_exact_total(engine: LocalEngine) -> None:
    prompt = engine.encode(PREFIX)
    good = _greedy(engine, prompt, 4)
    bad = _worst(engine, prompt + good[:1])
    top = good[:1] + [bad] + good[2:]  # SPD's top draft, with a token the model would never pick
    short, long = good[:2], good  # the shorter one has the higher exact total
    rank_only = {"verify_rounds": 1, "verify_top": None, "verify_log_ratio": float("-inf"), "verify_gate": None}
    kept = _verify(engine, [top, long, short], **rank_only, verify_first="keep", verify_score="total")
    assert [h.tokens for h in kept] == [tuple(top), tuple(short), tuple(long)]
    by_mean = _verify(engine, [top, long, short], **rank_only, verify_first="keep", verify_score="mean")
    assert by_mean[0].tokens == tuple(top)
    cut = _verify(engine, [top, long], verify_rounds=1, verify_top=1, verify_log_ratio=-50.0, verify_gate=None,
                  verify_first="cut", verify_score="total")
    assert [h.tokens for h in cut] == [tuple(good[:1]), tuple(long)]  # the top is cut but stays first


def test_rows_sharing_prefixes_get_the_verdicts_of_a_plain_forward(engine: LocalEngine) -> None:
    """The prefix tree runs a shared prefix once; each row still sees only its own path (and one-token rows none)."""
    prompt = engine.encode(PREFIX)
    logits, _ = engine.runner.prefill(prompt)
    shared = _greedy(engine, prompt, 3)
    rows = [tuple(shared + [5, 6]), tuple(shared[:2] + [7]), tuple(shared[:1]), tuple(shared + [5, 9, 9])]
    _assert_plain(engine, prompt, rows, judge(engine.runner, logits, engine.runner.cache, rows, "", _rules(engine)))
    assert engine.runner.cache.get_seq_length() == len(prompt)
    ones = [tuple(shared[:1]), (7,)]  # no tree at all: every row's one token comes from the prompt's logits
    _assert_plain(engine, prompt, ones, judge(engine.runner, logits, engine.runner.cache, ones, "", _rules(engine)))


def test_keep_without_a_gate_repairs_the_second_draft_too(engine: LocalEngine) -> None:
    """The top draft is not run then; the first row judged is rank 2's, and it is repaired like the rest."""
    prompt = engine.encode(PREFIX)
    good = _greedy(engine, prompt, 4)
    other = [int(_plain_logp(engine, prompt)[-1].argsort(descending=True)[1])]  # not greedy's first token
    second = other + [_worst(engine, prompt + other)] + good[2:]
    choice = int(_plain_logp(engine, prompt + other)[-1].argmax())
    out = _verify(engine, [good, second], verify_rounds=2, verify_gate=None, verify_first="keep", verify_score="total")
    assert out[0].tokens == tuple(good)
    assert [h.tokens[:2] for h in out[1:]] == [(*other, choice)]


def test_drafts_the_model_finds_implausible_from_their_first_token_are_not_shown(engine: LocalEngine) -> None:
    """Reproduces the test split's junk top drafts (`xt # # 2.1`): every draft cut to nothing used to
    bring SPD's unverified top draft back."""
    prompt = engine.encode(PREFIX)
    junk = [[_worst(engine, prompt)] + _greedy(engine, prompt, 3), [_worst(engine, prompt)] * 3]
    cut = {"verify_rounds": 1, "verify_first": "cut", "verify_score": "total"}
    assert _verify(engine, junk, **cut) == []
    shown_before = _verify(engine, junk, **cut, verify_empty="top")
    assert [h.tokens for h in shown_before][:1] == [tuple(junk[0])]


def test_ranked_drafts_keep_their_own_scores_and_their_order() -> None:
    """Issue 22: the CLI printed one score for every draft: ranking re-scored each draft below the one
    before it (a short draft's better total became the head's mean minus 1e-6). Each keeps its own now."""
    head = Hypothesis(tokens=(1, 2, 3, 4), score=-4.0)  # SPD's top draft: stays first
    short = Hypothesis(tokens=(5,), score=-0.5)  # a better total than the head's
    other = Hypothesis(tokens=(6, 7), score=-3.0)
    out = ranked([head, other, short], DecodeOptions.of(verify_gate=None, verify_score="total"), lead=1)
    assert [h.tokens for h in out] == [head.tokens, short.tokens, other.tokens]
    assert [h.score for h in out] == [-4.0, -0.5, -3.0]
    assert [h.rank for h in out] == [0, 1, 2]
