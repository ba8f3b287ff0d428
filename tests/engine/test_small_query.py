"""The small-query attention (decoding/small_query.py): SDPA's results without SDPA's repeat_kv."""

from __future__ import annotations

from spd_lsp.api import DecodeRequest
import types

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from spd_lsp.engine.decoding import small_query
from spd_lsp.engine.decoding.small_query import NAME, MAX_QUERY, small_query_attention, use_small_query_attention
from spd_lsp.engine.decoding.drafts import DraftRules
from spd_lsp.engine.decoding.verify import judge, packed_logits
from spd_lsp.engine.local import LocalEngine
from tests.tiny_models import ARCHITECTURES, tiny_model

PROMPT = 12
HEAD_DIM = 16
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2}  # bf16: a few units in the last place of outputs ~1


def _module(group: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(num_key_value_groups=group, is_causal=True)


def _inputs(group: int, q: int, dtype: torch.dtype, kind: str, *, batch: int = 3):
    """Query/key/value of a batch after a PROMPT-token cache; row 0 left-padded (its first queries see nothing)."""
    generator = torch.Generator().manual_seed(q * 10 + group)
    kv_heads, width = 2, PROMPT + q
    query = torch.randn(batch, kv_heads * group, q, HEAD_DIM, generator=generator).to(dtype)
    key, value = (torch.randn(batch, kv_heads, width, HEAD_DIM, generator=generator).to(dtype) for _ in range(2))
    allowed = torch.ones(batch, 1, q, width, dtype=torch.bool).tril(PROMPT)
    allowed[0, :, :, : PROMPT + 2] = False  # padding: row 0's first two queries see nothing at all
    allowed[1, :, :, :3] = False
    if kind == "bool":
        return query, key, value, allowed
    return query, key, value, torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, float("-inf"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("group", [1, 3])
@pytest.mark.parametrize("q", [2, 5, 25, "the bound"])
def test_equals_sdpa_on_random_tensors(q: int | str, group: int, kind: str, dtype: torch.dtype, monkeypatch) -> None:
    q = MAX_QUERY[dtype] if q == "the bound" else q
    query, key, value, mask = _inputs(group, q, dtype, kind)
    calls = []
    monkeypatch.setattr(small_query, "grouped_attention", lambda *a, **k: calls.append(1) or GROUPED(*a, **k))
    out, weights = small_query_attention(_module(group), query, key, value, mask, scaling=0.3)
    exact_mask = mask if kind == "bool" else mask.float()
    exact, _ = sdpa_attention_forward(_module(group), query.float(), key.float(), value.float(), exact_mask,
                                      scaling=0.3)
    assert calls and weights is None  # computed here, not handed to SDPA
    assert out.dtype == dtype and out.shape == exact.shape == (3, q, 2 * group, HEAD_DIM)
    assert torch.equal(out[0, :2], torch.zeros_like(out[0, :2]))  # a query that sees nothing: zeros, as in SDPA
    torch.testing.assert_close(out.float(), exact, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


GROUPED = small_query.grouped_attention


def test_does_not_write_into_the_callers_query() -> None:
    query, key, value, mask = _inputs(1, 4, torch.float32, "bool")
    before = query.clone()
    small_query_attention(_module(1), query, key, value, mask, scaling=0.5)
    assert torch.equal(query, before)


@pytest.mark.parametrize("case", ["one token", "long query", "no mask", "per-head mask", "softcap", "sinks",
                                  "position bias", "dropout", "not the CPU"])
def test_what_it_does_not_handle_goes_to_sdpa(case: str, monkeypatch) -> None:
    q = {"one token": 1, "long query": MAX_QUERY[torch.float32] + 1}.get(case, 4)
    group = 1 if case == "long query" else 3  # grouped, a long query goes to SDPA's own GQA (below)
    query, key, value, mask = _inputs(group, q, torch.float32, "bool")
    if case == "not the CPU":
        query, key, value, mask = (x.to("meta") for x in (query, key, value, mask))
    kwargs = {"softcap": {"softcap": 30.0}, "sinks": {"s_aux": torch.zeros(6)},
              "position bias": {"position_bias": torch.zeros(1, 6, q, PROMPT + q)},
              "dropout": {"dropout": 0.1}}.get(case, {})
    mask = {"no mask": None, "per-head mask": mask.expand(-1, 6, -1, -1)}.get(case, mask)
    handed = []
    monkeypatch.setattr(small_query, "sdpa_attention_forward", lambda *a, **k: handed.append(k) or ("sdpa", None))
    assert small_query_attention(_module(group), query, key, value, mask, scaling=0.5, **kwargs)[0] == "sdpa"
    assert handed[0].get("dropout") == kwargs.get("dropout", 0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_a_long_masked_query_on_grouped_heads_runs_sdpas_gqa_not_repeat_kv(kind: str, dtype: torch.dtype,
                                                                           monkeypatch) -> None:
    """A prompt chunk after a cached one: SDPA reads the grouped key/value heads itself (`enable_gqa`), with the
    results of transformers' SDPA (which copies them with `repeat_kv` whenever there is a mask)."""
    q = MAX_QUERY[dtype] + 7
    query, key, value, mask = _inputs(3, q, dtype, kind)
    mask[0] = 0 if kind == "float" else True  # no row that sees nothing: SDPA answers those as it likes
    exact, _ = sdpa_attention_forward(_module(3), query.float(), key.float(), value.float(),
                                      mask if kind == "bool" else mask.float(), scaling=0.3)
    handed, repeated = [], []
    monkeypatch.setattr(small_query, "sdpa_attention_forward", lambda *a, **k: handed.append(1))
    monkeypatch.setattr(small_query, "grouped_attention", lambda *a, **k: handed.append(1))
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda q, k, v, **kw: repeated.append((k.shape[1], kw.get("enable_gqa"))) or real(q, k, v, **kw))
    out, weights = small_query_attention(_module(3), query, key, value, mask, scaling=0.3)
    assert not handed and repeated == [(2, True)] and weights is None  # the 2 key/value heads, as they are
    assert out.dtype == dtype and out.shape == exact.shape == (3, q, 6, HEAD_DIM)
    torch.testing.assert_close(out.float(), exact, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


def _rules(engine: LocalEngine) -> DraftRules:
    return DraftRules(table=engine.table, stop_ids=frozenset(), stop_at_newline=False)


def _trees(engine: LocalEngine) -> list[tuple[int, ...]]:
    """Three drafts sharing a prefix: a prefix tree like verification's."""
    a, b, c = (tuple(engine.encode(text)) for text in (" in names:\n", " in ('a', 'b'):", ".endswith('.py')"))
    return [a, a[:2] + b, c]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_tiny_models_switch_to_it(architecture: str) -> None:
    model = tiny_model(architecture).model
    assert model.config._attn_implementation == NAME
    assert not use_small_query_attention(model)  # already on it: nothing to switch


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_packed_verification_logits_equal_the_sdpa_models(architecture: str, dtype: torch.dtype,
                                                         monkeypatch) -> None:
    loaded = tiny_model(architecture)
    loaded.model.to(dtype)
    engine = LocalEngine(loaded)
    prompt = engine.encode("for name in names:\n    if name")
    rows = _trees(engine)
    calls = []
    monkeypatch.setattr(small_query, "grouped_attention", lambda *a, **k: calls.append(1) or GROUPED(*a, **k))
    results, ran = {}, {}
    for implementation in ("sdpa", NAME):
        loaded.model.set_attn_implementation(implementation)
        engine.runner.prefill(prompt)
        cache = engine.runner.fork(2)  # two requests, a batch row each, as the engine's verify_together
        before = len(calls)
        results[implementation] = packed_logits(engine.runner, cache, [rows, rows[1:]], [len(prompt)] * 2)
        ran[implementation] = len(calls) - before
    assert ran == {"sdpa": 0, NAME: loaded.model.config.num_hidden_layers}  # every layer of the forward
    tolerance = TOLERANCE[dtype] * 10  # logits through a few layers
    for (plain, paths), (small, small_paths) in zip(results["sdpa"], results[NAME]):
        assert paths == small_paths
        for a, b in zip(plain, small):
            torch.testing.assert_close(b.float(), a.float(), atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_verdicts_are_those_of_the_sdpa_model(architecture: str) -> None:
    loaded = tiny_model(architecture)
    engine = LocalEngine(loaded)
    prompt, rows = engine.encode("import os\nimport sys\nresult = os"), _trees(engine)
    verdicts = {}
    for implementation in ("sdpa", NAME):
        loaded.model.set_attn_implementation(implementation)
        logits, _ = engine.runner.prefill(prompt)
        verdicts[implementation] = judge(engine.runner, logits, engine.runner.cache, rows, "", _rules(engine))
    for plain, small in zip(verdicts["sdpa"], verdicts[NAME]):
        assert (small.tokens, small.choice, small.rank) == (plain.tokens, plain.choice, plain.rank)
        assert small.logp == pytest.approx(plain.logp, abs=1e-4)


@pytest.mark.integration
def test_the_bundled_model_loads_with_it_unless_turned_off() -> None:
    """transformers' forward (fast=False; the fast path's own forward calls `grouped_attention` itself)."""
    from spd_lsp.engine.model import load_model

    assert load_model(fast=False).model.config._attn_implementation == NAME
    assert load_model(fast=False, small_query=False).model.config._attn_implementation == "sdpa"
    assert load_model(fast=False, attention="eager").model.config._attn_implementation == "eager"


@pytest.mark.integration
def test_the_bundled_models_float32_drafts_are_sdpas(monkeypatch) -> None:
    """Verified SPD drafts on real code: the same texts under either attention (float32; in bf16 any change of
    kernel moves near-ties, as bf16 itself does against float32)."""
    import argparse
    import inspect

    from spd_lsp.api import DecodeOptions
    from spd_lsp.engine.model import load_model

    engine = LocalEngine(load_model(dtype="float32", fast=False))  # transformers attention: the fast path has its own
    lines = inspect.getsource(argparse).splitlines(keepends=True)
    texts = ["".join(lines[:i]) + lines[i][: len(lines[i]) // 2] for i in (400, 1200, 2000)]
    prefixes = [engine.tokenizer.decode(engine.encode(text)[-370:]) for text in texts]  # as bench_verify's
    calls = []
    monkeypatch.setattr(small_query, "grouped_attention", lambda *a, **k: calls.append(1) or GROUPED(*a, **k))
    drafts = {}
    for implementation in ("sdpa", NAME):
        engine.loaded.model.set_attn_implementation(implementation)
        engine.runner.rewind(0)
        drafts[implementation] = [[d.text for d in engine.complete(DecodeRequest(p, DecodeOptions(max_tokens=10, k=3))).drafts]
                                  for p in prefixes]
    assert calls  # the kernel ran (verification, prompt chunks)
    assert drafts[NAME] == drafts["sdpa"]


def test_an_unmasked_one_token_query_on_grouped_heads_goes_to_sdpas_packed_path(monkeypatch) -> None:
    """A decode step of unpadded rows: SDPA gets an all-true mask (its one-token path stacks a group's heads,
    without one it ran `enable_gqa`), and answers as without it."""
    query, key, value, _ = _inputs(3, 1, torch.float32, "bool")
    seen = []
    real = small_query.sdpa_attention_forward
    monkeypatch.setattr(small_query, "sdpa_attention_forward",
                        lambda module, q, k, v, mask, **kw: seen.append(mask) or real(module, q, k, v, mask, **kw))
    out, _ = small_query_attention(_module(3), query, key, value, None, scaling=0.3)
    exact, _ = sdpa_attention_forward(_module(3), query, key, value, None, scaling=0.3)
    assert seen[0] is not None and seen[0].dtype == torch.bool and bool(seen[0].all())
    torch.testing.assert_close(out, exact, atol=1e-6, rtol=1e-6)
    small_query_attention(_module(1), query[:, :2], key, value, None, scaling=0.3)  # no groups: no mask added
    assert seen[1] is None
