"""The kernel library beyond this machine's best ISA: the AVX2 variant (most developer laptops) built here with forced
flags and its kernels checked against torch's, and every kernel source compiled for arm64 (Apple silicon, Graviton) by
Debian's cross compiler. `make test` installs that compiler and sets SPD_REQUIRE_ARM64_CROSS=1, so CI cannot skip it."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spd_lsp.engine.kernels import build as kernels

ROOT = Path(__file__).resolve().parents[2]
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2",  # ATen, oneDNN and our build pick their AVX2 code
        # and no compiled graph of theirs is kept: inductor's cache shared with this process served one to a later
        # test here that crashed it (its key does not tell ATEN_CPU_CAPABILITY apart)
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
# The kernel tests that hold at any ISA (those of the AVX-512 BF16 / AMX kernels skip themselves where not built).
EQUALITY_TESTS = ["tests/engine/test_blocks.py", "tests/engine/test_blocks_int8.py", "tests/engine/test_attention_kernel.py", "tests/engine/test_pointwise.py",
                  "tests/engine/test_verdicts.py", "tests/engine/test_store.py"]


def x86_with_avx2() -> bool:
    if platform.machine() != "x86_64":
        return False
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        return " avx2 " in next((line for line in info if line.startswith("flags")), "") + " "


def run_avx2(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, **AVX2, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(not x86_with_avx2(), reason="an x86 CPU with AVX2 runs the AVX2 variant")
def test_the_avx2_variant_builds_for_avx2_only_and_offers_what_avx2_runs() -> None:
    probe = ("import torch; from spd_lsp.engine.kernels import build as k; ok = k.build(); "
             "print(torch.backends.cpu.get_cpu_capability(), ok, ' '.join(k.target()[1]), sorted(k.features()), "
             "k.reason(), sep='|')")
    done = run_avx2(["-c", probe], timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    capability, ok, flags, features, reason = done.stdout.strip().splitlines()[-1].split("|")
    assert capability == "AVX2" and ok == "True", reason
    assert "-mavx2" in flags.split() and not any(flag.startswith("-mavx512") or flag.startswith("-mamx")
                                                 for flag in flags.split())
    assert features == str(sorted({"attention", "avx2-int8", "blocks", "pointwise", "verdict"}))


@pytest.mark.skipif(not x86_with_avx2(), reason="an x86 CPU with AVX2 runs the AVX2 variant")
def test_the_avx2_variants_kernels_pass_the_equality_tests() -> None:
    done = run_avx2(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short",
                     "-k", "not half_written", *EQUALITY_TESTS], timeout=1500)  # (that one rebuilds the library)
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR", "E "))]
    assert done.returncode == 0, "\n".join(failed[:40]) or done.stdout[-3000:]
    assert " passed" in done.stdout.splitlines()[-1]


def cross_compiler() -> str | None:
    return shutil.which("aarch64-linux-gnu-g++")


def test_every_kernel_source_compiles_for_arm64() -> None:
    compiler = cross_compiler()
    if compiler is None:
        if os.environ.get("SPD_REQUIRE_ARM64_CROSS") == "1":
            pytest.fail("aarch64-linux-gnu-g++ is missing (Debian's g++-aarch64-linux-gnu; make test installs it)")
        pytest.skip("no arm64 cross compiler (Debian's g++-aarch64-linux-gnu)")
    import torch.utils.cpp_extension as extension

    includes = [arg for path in extension.include_paths() for arg in ("-isystem", path)]
    for source in kernels.SOURCES:
        done = subprocess.run([compiler, "-std=c++20", "-O2", "-fopenmp", "-fsyntax-only", *includes, str(source)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{source.name} does not compile for arm64:\n{done.stderr[-3000:]}"
