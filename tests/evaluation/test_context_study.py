"""context_study: the positions it takes (as the study), the figures it reports, the decoding it uses."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from spd_lsp.settings import Settings
from evaluation.context_study import Case, answer, report_on, shipped
from evaluation.metrics import score_request
from evaluation.positions import Position
from evaluation.study import schedule
from spd_lsp.session.session import token_spans
from tests.engine.test_prompt_formats import family_engine


def plan(samples: dict[tuple[str, str], list[int]], **args: Any) -> list[tuple[str, str, int]]:
    defaults = {"per_kind": 10, "total_per_kind": 10**9, "start": 0, "stop": None}
    return list(schedule(samples, argparse.Namespace(**{**defaults, **args})))


def test_a_kind_fills_its_total_from_the_corpora_that_have_positions() -> None:
    """The requests corpus has 1 call position here: the other corpus fills the kind to its total."""
    samples = {("requests", "call"): [0], ("jinja2", "call"): list(range(8)), ("jinja2", "mid_line"): list(range(8))}
    taken = plan(samples, total_per_kind=5)
    calls = [(name, index) for name, kind, index in taken if kind == "call"]
    assert calls == [("requests", 0), ("jinja2", 0), ("jinja2", 1), ("jinja2", 2), ("jinja2", 3)]
    assert len([t for t in taken if t[1] == "mid_line"]) == 5


@pytest.mark.parametrize("cut", [1, 2, 4])
def test_processes_splitting_the_indexes_take_what_one_process_would(cut: int) -> None:
    samples = {("a", "call"): list(range(6)), ("b", "call"): list(range(2)), ("b", "mid_line"): list(range(6))}
    whole = plan(samples, total_per_kind=7)
    assert plan(samples, total_per_kind=7, stop=cut) + plan(samples, total_per_kind=7, start=cut) == whole


def test_the_report_has_the_blend_rate_and_the_added_latency(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = []
    for index in range(4):
        for config, blends in (("prefix", [False, False]), ("snippets", [False, True])):
            score = score_request(["x = 1", "x = 2"], "x = 1", 10.0, 20.0 if config == "prefix" else 22.0)
            score.blended = blends
            lines.append(json.dumps({"corpus": "c", "kind": "call", "index": index, "config": config, **asdict(score),
                                     "prompt_tokens": 100, "prefill_ms": 5.0, "keystroke_prefill": 2}))
    path = tmp_path / "context.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = report_on([path])
    printed = capsys.readouterr().out
    assert "blend r2" in printed and "chars best" in printed
    snippets = next(r for r in out["all"] if r["name"] == "snippets")
    assert (snippets["P@1"], snippets["blend_2"]) == (1.0, 1.0)
    assert next(r for r in out["latency"] if r["config"] == "snippets")["total_ratio"].startswith("+1.100")


def test_positions_are_answered_with_the_shipped_decoding_and_blends_judged() -> None:
    options = shipped(4)
    assert options == Settings(max_tokens=4).decode_options() and options.verify_rounds >= 1
    engine = family_engine("file_sep")
    position = Position(Path("pkg/a.py"), "def add(a, b):\n    return a", " + b", kind="mid_line")
    case = Case(position, "\nprint(add(1, 2))\n", "pkg/a.py", position.prefix)
    record = answer(engine, case, "snippets", options, [("pkg/b.py", "def sub(a, b):\n    return a - b\n")])
    assert record["prompt"]["format"] == "file_sep" and record["prompt"]["snippets"]
    assert len(record["blended"]) == len(record["drafts"]) > 0


def test_a_budget_configuration_fits_the_whole_prefix_to_its_own_budget() -> None:
    """`prefix-N` (issue 21 item 4): the text before the cursor cut to its last N tokens, not to the default's."""
    from evaluation.context_study import BUDGETS, CONFIGS, DEFAULT_CONFIGS, PREFIX_TOKENS

    assert set(BUDGETS) <= set(CONFIGS) and not set(BUDGETS) & set(DEFAULT_CONFIGS)
    engine = family_engine("file_sep")
    whole = "".join(f"value_{i} = compute({i}, {i + 1})\n" for i in range(400)) + "result = value_1"
    assert len(engine.encode(whole)) > 2 * PREFIX_TOKENS
    fitted = Position(Path("pkg/a.py"), whole[-200:], " + 1", kind="mid_line")
    case = Case(fitted, "\n", "pkg/a.py", "", whole)
    options = shipped(2)
    tokens = {config: answer(engine, case, config, options, [])["prompt_tokens"] for config in ("prefix", "prefix-256", "prefix-1024")}
    assert tokens["prefix"] < 256 - 10  # the fitted prefix as the case holds it
    for config in ("prefix-256", "prefix-1024"):  # cut at a line start: up to a line under the budget
        assert BUDGETS[config] - 40 <= tokens[config] <= BUDGETS[config] + 2, tokens


def test_a_case_holds_the_whole_text_before_the_cursor(tmp_path: Path) -> None:
    """A sampled position's prefix is its last 3,000 characters (~730 tokens): the 1,024- and 2,048-token
    budgets were cut from that and never saw more (the pilot's median prompt of 732 tokens at both)."""
    from evaluation.context_study import _case
    from evaluation.positions import sample_positions

    lines = [f"    value_{i} = compute({i}, {i + 1})\n" for i in range(300)]
    text = "def f():\n" + "".join(lines)
    path = tmp_path / "pkg" / "a.py"
    path.parent.mkdir()
    path.write_text(text)
    position = max(sample_positions([path], 50, kinds=("line_start",)), key=lambda p: len(p.prefix))
    assert len(position.prefix) == 3000
    engine = family_engine("file_sep")
    case = _case(position, tmp_path, token_spans(engine.tokenizer))
    assert case is not None and case.whole_prefix == text[: text.index(position.prefix + position.target) + 3000]
    assert len(case.whole_prefix) > 3000 and case.whole_prefix.endswith(position.prefix)


def test_the_cold_table_pairs_each_budget_with_the_default_at_the_same_positions() -> None:
    from evaluation.context_study import cold_table

    records = [{"position": i, "budget": budget, "verify": mode, "prefill_tokens": budget, "prefill_ms": budget * 0.5,
                "verify_ms": 100.0, "total_ms": budget * 0.5 + 300 + (200 if mode == "continue" else 0) + i, "load": 1.0}
               for i in range(5) for budget in (512, 1024) for mode in ("cut", "continue")]
    rows = {tuple(line.split(" | ")[:2]): line for line in cold_table(records).splitlines()[2:]}
    assert "| 256 | 302 | 100 | 558 | +1.000 " in rows["| 512", "cut"]  # prefill, total - prefill, verify, total
    assert "| 1014 | +1.817 " in rows["| 1024", "continue"]  # 512 + 300 + 200 + 2, over 512-cut's 558
