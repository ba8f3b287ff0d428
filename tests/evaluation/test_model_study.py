"""The model study's harness (evaluation/model_study.py): arms parse as documented, each typist asks with its own
arm's token budget, and the latency ratio pairs requests at the same prompt."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from evaluation.model_study import Arm, parse_arm, summarise_latency, typists
from spd_lsp.api import DecodeRequest
from tests.evaluation.test_multiline_study import sample_edits_from
from tests.session.test_server_session import FakeEngine


def test_an_arm_is_a_name_a_model_and_a_token_budget() -> None:
    assert parse_arm("smollm2=default@10") == Arm("smollm2", None, 10)
    assert parse_arm("small=default") == Arm("small", None, 10)
    assert parse_arm("g=~/m@x.gguf@6") == Arm("g", str(Path("~/m@x.gguf").expanduser()), 6)  # the last @ splits
    for bad in ("nomodel", "=default", "a/b=default", "g=default@0", "g=default@six"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_arm(bad)


class Recording(FakeEngine):
    def __init__(self, drafts: list[str]) -> None:
        super().__init__(drafts, steps=1, step_s=0.0)
        self.budgets: list[int] = []

    def complete(self, request: DecodeRequest, cancelled=None):  # type: ignore[no-untyped-def]
        self.budgets.append(request.options.max_tokens)
        return super().complete(request, cancelled)


def test_each_typist_asks_with_its_arms_budget_on_its_arms_model() -> None:
    small, large = Recording(["return sum(values)"]), Recording(["return"])
    arms = [Arm("small", None, 10), Arm("large", "large.gguf", 4)]
    writers = typists(arms, {(None, False): small, ("large.gguf", False): large})
    edit = sample_edits_from("def total(values):\n    return sum(values)\n\n\nx = total([1])\n")
    try:
        typed = {name: writer.write(edit, f"file:///t/{name}.py") for name, writer in writers.items()}
    finally:
        for writer in writers.values():
            writer.close()
    assert small.budgets and set(small.budgets) == {10}
    assert large.budgets and set(large.budgets) == {4}
    assert typed["small"].keys == 1  # one Tab takes the whole line
    assert typed["large"].keys > 1  # a word, then typing


def test_the_line_time_ratio_pairs_requests_at_the_same_prompt() -> None:
    rows = {"base": [{"line ms": 100.0, "ms / step": 10.0}, {"line ms": 400.0, "ms / step": 40.0}],
            "other": [{"line ms": 300.0, "ms / step": 20.0, "prefill ms / 100 tokens": 50.0},
                      {"line ms": 1200.0, "ms / step": 80.0}]}
    base, other = summarise_latency(rows, "base")
    assert base["line × base"] == 1.0 and other["line × base"] == 3.0  # medians of ratios (3, 3), not 750 / 250
    assert other["line ms"] == 750.0 and other["ms / step"] == 50.0 and other["prefill ms / 100 tokens"] == 50.0
    assert base["prefill ms / 100 tokens"] != base["prefill ms / 100 tokens"]  # none measured: NaN


def test_arms_share_an_engine_per_model_and_bos_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluation import model_study

    class Tokenizer:
        add_bos_token = False

    class Engine:
        def __init__(self, loaded: object) -> None:
            self.tokenizer, self.loaded = Tokenizer(), loaded

    monkeypatch.setattr(model_study, "load_model", lambda spec: f"loaded {spec}")
    monkeypatch.setattr(model_study, "LocalEngine", Engine)
    arms = [Arm("a", "g.gguf", 10), Arm("b", "g.gguf", 4), Arm("c", "g.gguf", 10, bos=True), Arm("d", None, 10)]
    made = model_study.engines(arms)
    assert set(made) == {("g.gguf", False), ("g.gguf", True), (None, False)}  # a and b share one engine
    assert made["g.gguf", True].tokenizer.add_bos_token is True
    assert made["g.gguf", False].tokenizer.add_bos_token is False and made["g.gguf", True].loaded == "loaded g.gguf"
