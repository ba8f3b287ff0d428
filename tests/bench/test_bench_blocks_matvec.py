"""bench/bench_blocks_matvec.py runs and prints a row per type and the floor (a small working set)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spd_lsp.engine.kernels import build

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not build.build(), reason="the kernel library does not build here")
def test_the_bench_prints_each_type_and_the_floor() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.bench_blocks_matvec", "--threads", "1", "--rounds", "1",
                           "--mib", "8", "--types", "Q4_K,Q6_K", "--clock", "cpu"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[2:]}
    assert set(rows) == {"Q4_K", "Q6_K", "floor"}
    assert abs(float(rows["Q4_K"][1]) - 0.5781) < 1e-3 and float(rows["Q6_K"][4]) > 0


@pytest.mark.skipif(not build.build(), reason="the kernel library does not build here")
def test_the_bench_compares_int8_and_float_x_on_the_bundled_shapes() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.bench_blocks_matvec", "--threads", "1", "--rounds", "2",
                           "--mib", "4", "--types", "Q4_1,Q8_0", "--clock", "cpu", "--shapes", "bundled", "--float-x",
                           "--dtype", "float32"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[2:]}
    assert set(rows) == {"Q4_1", "Q8_0", "Q4_1-float", "Q8_0-float", "floor"}
    assert len(rows["Q8_0-float"]) == 8 and float(rows["Q8_0-float"][7]) > 0  # its ratio float / int8
