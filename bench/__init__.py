"""Benchmarks: scripts that print figures (speed, memory, faults) for docs/ and bench/README.md; no
timed tests. They may import spd_lsp, ngram_db and tests' helpers (tiny models); baselines.py registers
what the product does not offer (the batched nucleus).
"""
