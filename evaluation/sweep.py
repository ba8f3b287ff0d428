"""Tuning SPD on the validation split: one parameter at a time around the current best.

The objective is what a user gets from k drafts: P@k plus the share of the line the
best draft gets right (both in [0, 1]); the test split is never looked at here.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from ngram_db import NgramSource
from spd_lsp.api import PAPER_NGRAM_WEIGHTS, DecodeOptions
from spd_lsp.engine.local import LocalEngine
from evaluation.metrics import summarise
from evaluation.positions import Position
from evaluation.run import Config, evaluate

WEIGHT_PROFILES: dict[str, dict[int, float]] = {
    "paper": dict(PAPER_NGRAM_WEIGHTS),
    "flat": {2: 0.1, 3: 0.1, 4: 0.1, 5: 0.1, 6: 0.1},
    "long": {2: 0.01, 3: 0.02, 4: 0.07, 5: 0.15, 6: 0.3},
    "short": {2: 0.1, 3: 0.15, 4: 0.15, 5: 0.06, 6: 0.04},
}
AXES: dict[str, list[Any]] = {
    "alpha": [0.1, 0.25, 0.4, 0.54, 0.7],
    "temperature": [0.06, 0.3, 0.6, 1.0],
    "ngram_weights": list(WEIGHT_PROFILES),
    "candidate_pool": [None, 6, 15, 30],
    "drop_unsupported": [False, True],
    "log_delta": [-200.0, -6.0, -3.0, -1.5],
}


def objective(summary: dict[str, float]) -> float:
    return summary["P@k"] + summary["line_share_best"]


def _options(base: DecodeOptions, axis: str, value: Any) -> DecodeOptions:
    if axis == "ngram_weights":
        value = WEIGHT_PROFILES[value]
    return base.but(**{axis: value})


def sweep(
    engine: LocalEngine,
    positions: Sequence[Position],
    ngrams: NgramSource,
    start: DecodeOptions,
    axes: dict[str, list[Any]] = AXES,
    log: Path | None = None,
) -> tuple[DecodeOptions, list[dict[str, Any]]]:
    """Coordinate ascent, one pass over the axes; returns the best options and every row measured."""
    best, rows = replace(start, method="superposed"), []
    for axis, values in axes.items():
        configs = [Config(f"{axis}={v}", _options(best, axis, v), "workspace") for v in values]
        results = evaluate(engine, configs, positions, {"workspace": ngrams})
        scored = []
        for value, result in zip(values, results):
            summary = summarise(result.scores)
            rows.append({"axis": axis, "value": value, "objective": objective(summary), **summary})
            scored.append((objective(summary), value))
            if log:
                with log.open("a") as out:
                    out.write(json.dumps(rows[-1]) + "\n")
        current = best.flat()[axis]
        current_key = next((k for k, w in WEIGHT_PROFILES.items() if w == current), current)
        best_score = max(s for s, _ in scored)
        # Keep the current value on ties: a change must earn its place.
        kept = dict((v, s) for s, v in scored).get(current_key)
        if kept is None or best_score > kept:
            best = _options(best, axis, max(scored, key=lambda sv: sv[0])[1])
    return best, rows
