"""The decode step's CPU attention kernel (spd_lsp/engine/kernels/attention.py, attention.cpp; built by build.py):
built for real with the machine's compiler, checked against SDPA, and the step's fallback where it cannot be built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from spd_lsp.engine.kernels import attention
from spd_lsp.engine.kernels import build as kernels
from tests.tiny_models import compiling_pair, step_pair


@pytest.fixture(scope="module")
def kernel() -> None:
    assert kernels.build(), kernels.reason()


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, column: int) -> torch.Tensor:
    mask = (torch.arange(k.shape[2]) <= column)[None, None, None, :]
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("rows, heads, group, length, dim, column", [
    (1, 3, 3, 640, 64, 510),  # the bundled model's step: 3 key/value heads, 3 query heads each
    (8, 3, 3, 256, 64, 0),  # 8 rows, the first column only
    (2, 2, 4, 300, 80, 299),  # every column; a head size without a fixed-size loop
    (1, 1, 1, 130, 128, 64),  # one head; a column just past a chunk
])
def test_the_kernel_equals_sdpa_over_the_columns_up_to_its_column(kernel, dtype, rows, heads, group, length, dim,
                                                                  column) -> None:
    torch.manual_seed(0)
    q = torch.randn(rows, heads, group, dim, dtype=dtype)
    k, v = (torch.randn(rows, heads, length, dim, dtype=dtype) for _ in range(2))
    k[:, :, column + 1:], v[:, :, column + 1:] = float("nan"), float("nan")  # past the column: never read
    got = attention.decode_attention(q, k, v, torch.tensor([column]), dim ** -0.5)
    assert got.dtype == dtype and got.shape == q.shape
    want = _sdpa(q, k.nan_to_num(), v.nan_to_num(), column)
    tolerance = 2e-3 if dtype == torch.bfloat16 else 1e-5  # bf16: the output's own rounding
    torch.testing.assert_close(got.float(), want, atol=tolerance, rtol=tolerance)


def test_the_kernel_says_what_is_wrong_with_its_inputs(kernel) -> None:
    q, k = torch.randn(1, 3, 3, 64), torch.randn(1, 3, 16, 64)
    with pytest.raises(RuntimeError, match="column 16 outside the buffer of 16"):
        attention.decode_attention(q, k, k, torch.tensor([16]), 0.125)
    with pytest.raises(RuntimeError, match="bf16 or fp32"):
        attention.decode_attention(q.half(), k.half(), k.half(), torch.tensor([3]), 0.125)
    with pytest.raises(RuntimeError, match="disagree"):
        attention.decode_attention(q, k[:, :2], k[:, :2], torch.tensor([3]), 0.125)


def test_the_compiled_step_attends_on_the_kernel_as_one_graph(monkeypatch, kernel) -> None:
    from torch._dynamo.utils import counters

    monkeypatch.setenv("SPD_LSP_COMPILE", "1")
    torch._dynamo.reset()
    counters.clear()
    backend, runner, eager = compiling_pair(list(range(3, 20)))  # eager: SDPA over the masked bucket
    assert not backend.kernel  # built before the first compile, not at the load
    for token in (5, 6, 7):
        got, want = step_pair(runner, eager, token)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)
    assert backend.kernel and backend.state == "applied" and backend.info["fastPlan"]["attention"]["decode"] == "ours"
    assert backend.step_fn.calls == 3 and counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()


def test_a_kernel_that_does_not_build_leaves_the_step_on_sdpa(monkeypatch) -> None:
    monkeypatch.setenv("SPD_LSP_COMPILE", "1")
    monkeypatch.setattr(kernels, "_state", {})

    def no_compiler() -> None:
        raise RuntimeError("Error building extension: c++ not found")

    monkeypatch.setattr(kernels, "_load", no_compiler)
    torch._dynamo.reset()
    backend, runner, eager = compiling_pair(list(range(3, 20)))
    for token in (5, 6):
        torch.testing.assert_close(*step_pair(runner, eager, token))
    assert not backend.kernel and "c++ not found" in backend.state and "c++ not found" in backend.serving.why["attention"]
    assert backend.info["compiled"] and backend.step_fn.calls == 2  # the step still compiled, on SDPA
    torch._dynamo.reset()


def test_the_kernel_can_be_left_out_by_the_kernels_setting() -> None:
    from spd_lsp.engine import fast
    from tests.tiny_models import tiny_model

    backend = fast.build(tiny_model("llama").model, compile=False, left_out=("attention",))
    backend.prepare()
    assert backend.plan.attention == "sdpa" and backend.plan.why["attention"] == "left out by the kernels setting"
    assert not backend.kernel


def _copied_target(monkeypatch, tmp_path) -> tuple[str, Path, Path]:
    """The library's target moved to an empty build directory under `tmp_path`; its built file kept aside."""
    name, flags, directory = kernels.target()
    copy = tmp_path / "spd-kernels" / name
    copy.mkdir(parents=True)
    monkeypatch.setattr(kernels, "target", lambda: (name, flags, copy))
    monkeypatch.setattr(kernels, "_state", {})
    monkeypatch.setattr(torch.library, "register_fake", lambda name: lambda fn: fn)  # registered once already
    return name, directory / f"{name}.so", copy


def _fake_torch_build(monkeypatch, built: Path, calls: list[float]) -> None:
    """torch's loader as it behaves: it waits, without end, while its lock file is in the build directory (here: fails
    at once); else it "builds" (copies the built library). Loading is recorded, not done (this process has it)."""
    from torch.utils import cpp_extension

    def load(name: str, build_directory: str, **_: object) -> None:
        assert not (Path(build_directory) / "lock").exists(), "torch's loader would wait on this lock without end"
        calls.append(time.monotonic())
        shutil.copy(built, Path(build_directory) / f"{name}.so")

    monkeypatch.setattr(cpp_extension, "load", load)
    monkeypatch.setattr(torch.ops, "load_library", lambda path: calls.append(-1.0))


def test_a_build_lock_left_by_a_process_that_stopped_building_does_not_stall_the_next_build(
        monkeypatch, tmp_path, kernel) -> None:
    """torch's loader takes a lock file in the build directory and waits, without end, while it exists: a process
    that exited or was killed mid-build (a daemon build thread dies with its process: an engine stopped in its first
    minute) left it, and every start after it, until it was 10 minutes old, waited (seen here: a test run stalled
    10 minutes on a lock a script left 4 minutes before). Failed before: a fresh lock was kept."""
    name, built, copy = _copied_target(monkeypatch, tmp_path)
    (copy / "lock").write_text("")  # left a moment ago
    calls: list[float] = []
    _fake_torch_build(monkeypatch, built, calls)
    assert kernels.build(), kernels.reason()
    assert kernels.ready() and len(calls) == 1 and calls[0] > 0 and not (copy / "lock").exists()


def test_a_second_process_waits_for_the_build_in_progress_and_loads_its_library(monkeypatch, tmp_path, kernel) -> None:
    """While another process builds (it holds the build's advisory lock), a start waits for it rather than taking its
    lock file for a stale one, then loads what it built without building again."""
    name, built, copy = _copied_target(monkeypatch, tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fasteners, os, shutil, sys, time; "
         "lock = fasteners.InterProcessLock(sys.argv[1]); "
         "lock.acquire(); open(sys.argv[2], 'w').close(); print('held', flush=True); time.sleep(1.5); "
         "shutil.copy(sys.argv[3], sys.argv[4]); os.remove(sys.argv[2])",
         str(copy / kernels.BUILD_LOCK), str(copy / "lock"), str(built), str(copy / f"{name}.so")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        calls: list[float] = []
        _fake_torch_build(monkeypatch, built, calls)
        started = time.monotonic()
        assert kernels.build(), kernels.reason()
        assert time.monotonic() - started >= 1.0 and calls == [-1.0]  # waited, then loaded the other's library
    finally:
        holder.wait(30)


def test_a_half_written_library_is_built_again(monkeypatch, tmp_path) -> None:
    """A library file left truncated (a process killed while it wrote it; seen here as a build directory no start
    could load until it was deleted by hand) is removed and built again, once, instead of failing every start."""
    import shutil as sh

    name, flags, directory = kernels.target()
    copy = tmp_path / "spd-kernels" / name
    sh.copytree(directory, copy)
    (copy / f"{name}.so").write_bytes((directory / f"{name}.so").read_bytes()[:4096])  # cut short
    monkeypatch.setattr(kernels, "target", lambda: (name, flags, copy))
    monkeypatch.setattr(kernels, "_state", {})
    monkeypatch.setattr(torch.library, "register_fake", lambda name: lambda fn: fn)  # registered once already
    loaded = []
    monkeypatch.setattr(torch.ops, "load_library", lambda path: loaded.append(path) or _refuse_short(path))
    assert kernels.build(), kernels.reason()
    assert (copy / f"{name}.so").stat().st_size > 4096 and len(loaded) >= 2  # built again, then loaded again


def _refuse_short(path: str) -> None:
    """torch.ops.load_library's answer to a truncated file, without loading a second copy of our ops here."""
    if os.path.getsize(path) <= 4096:
        raise OSError(f"Could not load this library: {path}")
