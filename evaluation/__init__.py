"""Measured draft quality: corpus split, cursor positions, metrics, runs, sweep and report, and the studies
(study.py, context_study.py) with paired bootstrap intervals (compare.py).

Not shipped (not in the wheel): it may import spd_lsp and ngram_db, matplotlib and scipy; spd_lsp never
imports it (pyproject.toml [tool.importlinter]).
"""
