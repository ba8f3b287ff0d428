"""A first start (the kernel library not built yet): the build runs beside the load, a model too big for torch's
kernels waits for ours instead of running on them, and the engine forks no spare while the library builds."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from gguf import GGMLQuantizationType as T
from transformers import LlamaConfig, LlamaForCausalLM

from spd_lsp.api import Cancelled, DecodeOptions, DecodeRequest, ModelSpec
from spd_lsp.engine.fast import backend as fast_backend
from spd_lsp.engine.fast.layouts import dense
from tests.gguf_support import write_gguf

REQUEST = DecodeRequest("def add(a, b):\n    return", options=DecodeOptions(k=2, max_tokens=3))


def _tiny_llama() -> torch.nn.Module:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2)).eval()


def _first_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, threading.Event, list[int]]:
    """A tiny model of Q4_0 blocks loaded as on a first start of a model too big for torch's kernels
    (`FLOAT_COPY_BUDGET` 0): the kernel library builds until `gate` is set; `on_torch` counts torch's kernels' calls on
    the blocks."""
    from spd_lsp.engine.loading import load_local

    path = write_gguf(_tiny_llama(), tmp_path / "tiny.gguf", quantize=int(T.Q4_0))
    monkeypatch.setenv("SPD_LSP_MODEL_CACHE", str(tmp_path / "cache"))
    gate = threading.Event()
    library = fast_backend.kernel_library
    real_build = library.build
    monkeypatch.setattr(fast_backend, "FLOAT_COPY_BUDGET", 0, raising=False)  # the tiny model: too big
    monkeypatch.setattr(library, "built", lambda: False)
    monkeypatch.setattr(library, "build", lambda: gate.wait(120) and real_build())
    on_torch: list[int] = []
    torch_mm = dense.BlocksTorch.mm
    monkeypatch.setattr(dense.BlocksTorch, "mm", lambda self, x: on_torch.append(1) or torch_mm(self, x))
    return load_local(ModelSpec(path=str(path), device="cpu")), gate, on_torch


def test_a_model_too_big_for_torch_s_kernels_waits_for_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect (issue 45, a first start of a 1.7B Q4_K_M): until our kernel library was built, a model of blocks whose
    float copy would exceed `FLOAT_COPY_BUDGET` ran torch's ops on slices of its blocks dequantised at every call: its
    warm-up took 21 s, its requests outlived the client's 30 s while they took the CPU from the build, and the first
    drafts came after 100 s. Now its warm-up is left out and its requests wait for the library (cancellable)."""
    loaded, gate, on_torch = _first_start(tmp_path, monkeypatch)
    assert on_torch == []  # no warm-up on torch's kernels
    assert loaded.info["waitsForLibrary"] is True and loaded.info["fastPlanState"] == "pending"
    asked = time.monotonic()
    with pytest.raises(Cancelled):  # a request given up while it waits says so
        loaded.engine.complete(REQUEST, lambda: time.monotonic() - asked > 0.3)
    answers = []
    request = threading.Thread(target=lambda: answers.append(loaded.engine.complete(REQUEST)))
    request.start()
    request.join(1.0)
    assert request.is_alive() and not answers  # waiting for the library
    gate.set()
    request.join(120)
    assert answers and answers[0].drafts
    assert on_torch == []  # neither the warm-up nor a request ran torch's kernels on the blocks
    assert loaded.info["waitsForLibrary"] is False and loaded.info["fastPlanState"] == "applied"


def test_the_kernel_library_starts_building_with_the_load_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The build runs in a thread of its own at the lowest priority from the start of a model's load, once a process,
    and not at all where the library is built."""
    import os

    seen = []
    done = threading.Event()
    library = fast_backend.kernel_library
    monkeypatch.setattr(fast_backend, "_early_build", threading.Lock())
    monkeypatch.setattr(library, "built", lambda: True)
    fast_backend.build_library_early()
    monkeypatch.setattr(library, "built", lambda: False)
    monkeypatch.setattr(library, "build", lambda: seen.append(
        (threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))) or done.set())
    fast_backend.build_library_early()
    fast_backend.build_library_early()
    assert done.wait(10)
    time.sleep(0.2)
    assert seen == [("spd-kernel-build", max(fast_backend.BUILD_NICE, os.getpriority(os.PRIO_PROCESS, 0)))]


def test_an_engine_forks_no_spare_while_the_kernel_library_builds(tmp_path: Path) -> None:
    """A spare forked then would get the build's locks without its thread and run its self-test on torch's kernels
    beside the first requests (a 1.7B's spare took a core for 19 s, then failed its self-test): no spare then."""
    from spd_lsp.address import parse
    from spd_lsp.remote.client import Connection
    from tests.engine_support import engine_env, start_engine

    env = engine_env(tmp_path, SPD_LSP_ENGINE_LOADER="tests.engine_support:building_loaded")
    process, address = start_engine(["--socket", str(tmp_path / "e.sock"), "--standby", "--idle-timeout", "30"], env)
    try:
        connection = Connection(parse(address))
        _, future = connection.request({"op": "status"})
        assert future.result(timeout=30)["status"]["standby"] is None
        connection.close()
    finally:
        process.kill()
        process.wait(10)


def test_requests_through_the_shared_engines_batcher_wait_for_the_library_and_are_answered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared engine's model thread (`Batcher`) on a first start of a model too big for torch's kernels: requests
    from two front ends wait for the library (none runs torch's kernels on the blocks), one cancelled meanwhile leaves
    with `Cancelled` without holding the others, and both others are answered once the library is there."""
    from spd_lsp.engine.batcher import Batcher, BatchJob

    loaded, gate, on_torch = _first_start(tmp_path, monkeypatch)
    scheduler = Batcher(loaded.engine)
    try:
        given_up = BatchJob(REQUEST, affinity="editor0")
        first = BatchJob(REQUEST, affinity="editor1")
        second = BatchJob(DecodeRequest("class Point:\n    def __init__(self", options=REQUEST.options),
                          affinity="editor2")
        futures = [scheduler.submit(job) for job in (given_up, first, second)]
        time.sleep(1.0)
        assert not any(future.done() for future in futures)  # all waiting for the library
        given_up.cancel()
        with pytest.raises(Cancelled):
            futures[0].result(timeout=30)
        assert not futures[1].done() and not futures[2].done()
        gate.set()
        answers = [future.result(timeout=120) for future in futures[1:]]
    finally:
        gate.set()
        scheduler.close()
    assert all(answer.drafts for answer in answers)
    assert on_torch == []
    assert loaded.info["fastPlanState"] == "applied"
