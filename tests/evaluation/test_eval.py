"""The evaluation harness end to end on a tiny corpus: real model, real stores, real server."""

from __future__ import annotations

import itertools
import json
import random
import textwrap
from pathlib import Path

import pytest

from ngram_db.memory import MemoryNgrams
from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.engine.local import LocalEngine
from evaluation.__main__ import main
from evaluation.corpus import split_files
from evaluation.metrics import self_bleu, score_request
from evaluation.positions import Position, sample_positions
from evaluation.sweep import sweep
from tests.tiny_models import CORPUS, tiny_model

MODULE = textwrap.dedent('''
    import os


    def walk_{n}(root, pattern="*.py"):
        """Every file below root whose name matches pattern."""
        found = []
        for dirpath, dirnames, filenames in os.walk(root):
            for name in filenames:
                if name.endswith(pattern[1:]):
                    found.append(os.path.join(dirpath, name))
        return sorted(found)
''')


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus" / "pkg"
    root.mkdir(parents=True)
    for n in range(12):
        (root / f"mod_{n}.py").write_text(MODULE.format(n=n))
    return root.parent


def test_split_is_by_file_and_stable(corpus: Path) -> None:
    first, again = split_files(corpus), split_files(corpus)
    assert first == again
    parts = [set(first.indexed), set(first.validation), set(first.test)]
    assert sum(map(len, parts)) == 12 and not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])


def test_positions_carry_the_real_rest_of_the_line(corpus: Path) -> None:
    files = sorted(corpus.rglob("*.py"))
    for p in sample_positions(files, 20, kinds=("line_start", "mid_line")):
        line = (p.prefix.rsplit("\n", 1)[-1] + p.target)
        assert line in p.path.read_text().splitlines()
        assert p.kind == "mid_line" or not p.prefix.rsplit("\n", 1)[-1].strip()


def test_scores() -> None:
    s = score_request(["found = []", "found = {}"], "found = {}", 1.0, 2.0)
    assert (s.exact_at_1, s.exact_at_k, s.chars_best, s.chars_any, s.distinct) == (False, True, 8, 10, 2)
    assert self_bleu(["a = b(c)", "a = b(c)"]) == pytest.approx(1.0)
    assert self_bleu(["return x", "yield y"]) < 0.2


def test_harness_runs_end_to_end(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["--corpus", str(corpus), "--workdir", str(tmp_path / "work"), "--out", str(out), "--results", str(out),
            "--positions", "2",
            "--latency-positions", "1", "--latency-ks", "1", "2", "--lsp-positions", "1", "--no-base",
            "--max-tokens", "4"]
    assert main(argv) == 0
    results = json.loads((out / "quality_results.json").read_text())
    assert [r["name"] for r in results["main"]][0] == "SPD + workspace n-grams"
    assert all(r["requests"] == 2 for r in results["main"])
    assert [r["share"] for r in results["lift"]] == [0.0, 0.25, 0.5, 1.0]
    assert results["lsp"]["identical_drafts"] == 1.0, results["lsp"]["mismatches"]
    for png in ("quality_p_at_k.png", "quality_latency_vs_k.png", "quality_ngram_lift.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_soft_interpolation_keeps_unseen_candidates_at_a_penalty() -> None:
    import math

    import torch

    from spd_lsp.engine.decoding.interpolate import interpolate

    lm = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    ngram = torch.tensor([[0.25, 0.0, 0.5]])
    soft = interpolate(lm, ngram, 0.4, -3.0, drop_unsupported=False)
    assert soft[0, 1].item() == pytest.approx(0.6 * math.log(0.3) - 3.0, abs=1e-5)
    assert soft[0, 0].item() == pytest.approx(0.6 * math.log(0.5) + 0.4 * math.log(0.25), abs=1e-5)
    assert interpolate(lm, ngram, 0.4, -3.0)[0, 1].item() == -math.inf


def test_sweep_moves_only_when_a_value_scores_better() -> None:
    engine = LocalEngine(tiny_model("llama"))
    ngrams = MemoryNgrams.from_sequences([engine.encode(text) for text in CORPUS[:4]])
    positions = [Position(Path("a.py"), "for name in names:\n    ", "if name.endswith('.py'):")] * 2
    start = DecodeOptions(k=2, max_tokens=4)
    axes = {"alpha": [0.2, start.alpha], "log_delta": [start.experimental.log_delta]}
    best, rows = sweep(engine, positions, ngrams, start, axes)
    measured = [(r["axis"], r["value"]) for r in rows]
    assert measured == [("alpha", 0.2), ("alpha", start.alpha), ("log_delta", start.experimental.log_delta)]
    by_alpha = {r["value"]: r["objective"] for r in rows if r["axis"] == "alpha"}
    assert best.alpha == (0.2 if by_alpha[0.2] > by_alpha[start.alpha] else start.alpha)
    assert best.method == "superposed"


def test_call_positions_carry_the_arguments_and_the_auto_paired_suffix(corpus: Path) -> None:
    files = sorted(corpus.rglob("*.py"))
    calls = sample_positions(files, 20, kinds=("call",))
    assert calls
    for p in calls:
        line_prefix = p.prefix.rsplit("\n", 1)[-1]
        assert p.kind == "call" and p.suffix == ")" and line_prefix.endswith("(")
        assert any(line.startswith(line_prefix + p.target + ")") for line in p.path.read_text().splitlines())
        assert p.target.count("(") == p.target.count(")")


def test_paired_interval_tells_a_five_point_difference_from_noise() -> None:
    from evaluation.compare import paired

    base = [float(i % 4 == 0) for i in range(300)]
    better = [1.0 if i % 20 == 1 else b for i, b in enumerate(base)]  # +5 points, paired
    shuffled = random.Random(1).sample(base, len(base))  # same rate, other positions
    gain = paired(better, base)
    assert gain.value == pytest.approx(0.05) and gain.low > 0
    noise = paired(shuffled, base)
    assert noise.low < 0 < noise.high
    assert paired([2.0, 4.0, 6.0], [1.0, 2.0, 3.0], "ratio").value == pytest.approx(2.0)


def test_blend_metric_flags_a_token_outside_the_models_top_m() -> None:
    import torch

    from spd_lsp.api import Draft
    from spd_lsp.cursor import Cursor
    from evaluation.blend import blended
    from spd_lsp.fit.edits import Fit

    engine = LocalEngine(tiny_model("llama"))
    prefix = "for name in names:\n    if name"
    options = DecodeOptions.of(heal=False, max_tokens=3)
    prompt = engine.prompt(DecodeRequest(prefix, DecodeOptions.of(heal=False))).healed.prompt_ids
    with torch.inference_mode():
        logits = engine.loaded.model(input_ids=torch.tensor([prompt])).logits[0, -1]
    order = torch.argsort(logits, descending=True).tolist()
    texts = {t: engine.table.texts[t] for t in order}
    top, sixth = (next(t for t in order[start:] if texts[t].strip() and "\n" not in texts[t]) for start in (0, 5))
    drafts = [Draft(texts[top], [top], 0.0), Draft(texts[sixth], [sixth], -1.0)]
    shown = [texts[top].rstrip(), texts[sixth].rstrip()]
    assert blended(engine, prefix, Fit(Cursor(prefix, len(prefix))), options, drafts, shown) == [False, True]


def test_study_report_compares_methods_on_the_positions_both_answered(tmp_path: Path) -> None:
    from dataclasses import asdict

    from evaluation.study import report_on

    lines = []
    for index in range(6):
        for config, drafts in (("greedy", ["found = []"]), ("spd", ["found = {}", "found = []"])):
            score = score_request(drafts, "found = []" if index % 2 else "found = {}", 10.0, 20.0)
            score.blended = [False] * len(drafts)
            lines.append(json.dumps({"corpus": "c", "kind": "call", "index": index, "config": config, **asdict(score)}))
    lines.append(json.dumps({"corpus": "c", "kind": "call", "index": 99, "config": "spd", **asdict(score)}))
    path = tmp_path / "study.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = report_on([path])
    assert out["positions"] == 6  # index 99 has no greedy answer
    spd = next(r for r in out["all"] if r["name"] == "spd")
    assert (spd["P@1"], spd["P@k"], spd["blend_1"]) == (0.5, 1.0, 0.0)
    vs_greedy = next(r for r in out["paired"] if r["against"] == "greedy")
    assert vs_greedy["P@3"].startswith("+0.500")


def test_study_verifies_the_plain_spd_run_as_the_decoding_hook_would() -> None:
    """One SPD run serves every verification variant: the drafts equal SPD + the verify hook's."""
    from evaluation.run import unverified, verified

    engine = LocalEngine(tiny_model("llama"))
    prefix = "for name in names:\n    if name"
    answers = {}
    for first, repair in itertools.product(("rank", "keep", "cut"), ("jacobi", "continue")):
        options = DecodeOptions.of(k=3, max_tokens=5, verify_rounds=2, verify_top=3, verify_log_ratio=-2.0,
                                verify_first=first, verify_score="total", verify_repair=repair,
                                last_token="step")  # a pass that closes its drafts itself is not derived (`_answer`)
        plain = engine.complete(DecodeRequest(prefix, unverified(options)))
        assert plain.timings.verify_s == 0
        derived = verified(engine, prefix, options, plain)
        hooked = engine.complete(DecodeRequest(prefix, options))
        assert [(d.text, d.token_ids) for d in derived.drafts] == [(d.text, d.token_ids) for d in hooked.drafts]
        assert derived.timings.verify_s > 0
        assert derived.timings.total_s == pytest.approx(plain.timings.total_s + derived.timings.verify_s)
        answers[first, repair] = [d.token_ids for d in derived.drafts]
    assert answers["cut", "continue"] != answers["cut", "jacobi"]  # this prompt has drafts to repair
