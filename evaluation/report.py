"""Markdown tables and matplotlib plots of the evaluation's results."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display on CI machines
import matplotlib.pyplot as plt  # noqa: E402


def _fmt(value: float, kind: str) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "–"
    return {"pct": f"{100 * value:.1f} %", "num": f"{value:.2f}", "ms": f"{value:.0f}", "ppl": f"{value:.1f}"}[kind]


def results_table(rows: Sequence[dict[str, Any]]) -> str:
    """One row per method: the quality figures and the time per request from the same run."""
    head = ("| method | P@1 | P@k | chars top draft | chars best draft | line share best | distinct drafts "
            "| Self-BLEU | ppl rank 1 | ppl rank 2 | ppl rank 3 | ppl best-of-k | decode ms (median) |")
    lines = [head, "| --- |" + " ---: |" * (head.count("|") - 2)]
    for r in rows:
        cells = [
            _fmt(r["P@1"], "pct"), _fmt(r["P@k"], "pct"), _fmt(r["chars_top"], "num"), _fmt(r["chars_best"], "num"),
            _fmt(r["line_share_best"], "pct"), _fmt(r["distinct"], "num"), _fmt(r["self_bleu"], "num"),
            *(_fmt(r.get(f"ppl_{i}", float("nan")), "ppl") for i in (1, 2, 3)), _fmt(r["ppl_best"], "ppl"),
            _fmt(r["decode_ms"], "ms"),
        ]
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def simple_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> str:
    """columns: (header, key, format kind)."""
    lines = ["| " + " | ".join(h for h, _, _ in columns) + " |", "|" + " ---: |" * len(columns)]
    for r in rows:
        cells = (str(r[key]) if kind == "str" else _fmt(r[key], kind) for _, key, kind in columns)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _save(fig: Any, ax: Any, path: Path) -> None:
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_precision(rows: Sequence[dict[str, Any]], path: Path) -> None:
    names = [r["name"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [100 * r["P@1"] for r in rows], width=0.4, label="P@1")
    ax.bar([x + 0.2 for x in xs], [100 * r["P@k"] for r in rows], width=0.4, label="P@k (k = 3)")
    ax.set_xticks(list(xs), names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("exact rest-of-line match (%)")
    ax.set_title("Exact line completions per method (held-out files)")
    _save(fig, ax, path)


def plot_latency(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """rows: {"method", "k", "decode_ms"}."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in dict.fromkeys(r["method"] for r in rows):
        points = sorted((r["k"], r["decode_ms"]) for r in rows if r["method"] == method)
        ax.plot([k for k, _ in points], [ms for _, ms in points], marker="o", label=method)
    ax.set_xlabel("drafts per request (k)")
    ax.set_ylabel("decode time per request (ms, median)")
    ax.set_title("Latency vs k (CPU, prefill excluded)")
    _save(fig, ax, path)


def plot_lift(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """rows: {"share", "P@1", "P@k", "line_share_best"}."""
    shares = [100 * r["share"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(shares, [100 * r["P@k"] for r in rows], marker="o", label="P@3")
    ax.plot(shares, [100 * r["P@1"] for r in rows], marker="o", label="P@1")
    ax.plot(shares, [100 * r["line_share_best"] for r in rows], marker="o", label="line share of best draft")
    ax.set_xlabel("indexed workspace files in the store (%)")
    ax.set_ylabel("%")
    ax.set_title("SPD n-gram lift as the workspace store grows")
    _save(fig, ax, path)


def plot_blend(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """rows: {"name", "blend_1", "blend_2", "blend_3", "verify_ms"}: blend rate by draft rank per method."""
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / 3
    for rank in (1, 2, 3):
        values = [100 * (0.0 if math.isnan(r[f"blend_{rank}"]) else r[f"blend_{rank}"]) for r in rows]
        ax.bar([x + (rank - 2) * width for x in range(len(rows))], values, width=width, label=f"rank {rank}")
    labels = [f"{r['name']}\nverify {r['verify_ms']:.0f} ms" if r["verify_ms"] else r["name"] for r in rows]
    ax.set_xticks(list(range(len(rows))), labels, fontsize=8)
    ax.set_ylabel("shown drafts with a token outside the model's top 5 (%)")
    ax.set_title("Blends by draft rank (held-out positions)")
    _save(fig, ax, path)


def plot_cost_curve(rows: Sequence[dict[str, Any]], path: Path, *, baseline: str = "greedy") -> None:
    """rows: {"name", "P@1", "P@k", "chars_best", "decode_ms"}: quality against time per request, both
    relative to `baseline` (the issue's targets are read off it: P@3 against beam, chars ≥ 1.3×, time ≤ 1.25×)."""
    base = next(r for r in rows if r["name"] == baseline)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, value in ((left, lambda r: 100 * r["P@k"]), (right, lambda r: r["chars_best"] / base["chars_best"])):
        for r in rows:
            point = (r["decode_ms"] / base["decode_ms"], value(r))
            ax.scatter(*point, marker="o")
            ax.annotate(r["name"], point, fontsize=7, xytext=(3, 3), textcoords="offset points")
    for ax in (left, right):
        ax.axvline(1.25, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel(f"decode + verify time per request (× {baseline}, medians)")
    right.axhline(1.3, color="grey", linestyle=":", linewidth=1)
    left.set_ylabel("P@3 (%)")
    right.set_ylabel(f"accepted characters of the best draft (× {baseline})")
    left.set_title("P@3 against cost")
    right.set_title("Best-draft characters against cost")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
