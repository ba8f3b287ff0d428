"""torch.compile of the decode step: inductor on the CPU, CUDA graphs on CUDA; eager, said once, where it cannot.

The compile cache lives in the user cache (`TORCHINDUCTOR_CACHE_DIR`, and Triton's on CUDA), so a later start
reuses the first one's kernels: only dynamo's trace runs again. SPD_LSP_COMPILE=0 runs eager (the tests do,
but for the test of the compile itself).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Any, Callable

import torch

from spd_lsp.engine.fast import compile_cache_dir, use_compile_cache

log = logging.getLogger(__name__)

COMPILE_ENV = "SPD_LSP_COMPILE"


def why_not(device: torch.device) -> str | None:
    """Why the step cannot be compiled here (None: it can be tried)."""
    setting = os.environ.get(COMPILE_ENV)
    if setting == "0":
        return f"{COMPILE_ENV}=0"
    if device.type == "cpu" and setting != "1":
        # Measured: the first compile of the 30-layer step took 119 s (load ~10), and 77 s with inductor's cache
        # warm at load ~8, all of it before the model answers; the compiled step gains 19.4 against 23.8 ms eager.
        return f"eager by default on the CPU (the compile holds the model's load for minutes; {COMPILE_ENV}=1 compiles)"
    if device.type not in ("cpu", "cuda"):
        return f"no compiled step on {device.type}"
    if device.type == "cpu" and not (shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
                                     or shutil.which("clang++")):
        return "no C++ compiler for inductor's CPU kernels (install g++ or clang++)"
    return None


class Compiled:
    """`fn` compiled on its first call (`fullgraph`: a graph break is an error); on any failure, `fn` itself from
    then on, the reason logged once and kept in `reason`."""

    def __init__(self, fn: Callable[..., Any], device: torch.device, *, enabled: bool = True,
                 status: dict[str, Any] | None = None) -> None:
        self.fn = fn
        self.status = status if status is not None else {}
        self.device = device
        self.reason = why_not(device) if enabled else "compile off"
        self.compiled: Callable[..., Any] | None = None
        self.compile_s: float | None = None
        self.calls = 0
        if self.reason is None:
            use_compile_cache()
            mode = "reduce-overhead" if device.type == "cuda" else None
            self.compiled = torch.compile(fn, fullgraph=True, dynamic=False, mode=mode)
        elif enabled:
            log.info("decode step runs eager: %s", self.reason)
        self._report()

    def _report(self) -> None:
        """`compiled`: the step runs compiled (or will: it compiles on its first call); `compileReason`: why not."""
        self.status.update(compiled=self.active, compileReason=self.reason, compileSeconds=self.compile_s)

    @property
    def active(self) -> bool:
        return self.compiled is not None

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            return self.fn(*args)
        first = self.calls == 0
        started = time.perf_counter()
        try:
            out = self.compiled(*args)
        except Exception as exc:  # noqa: BLE001 - any compile failure: eager, said once
            self.compiled, self.reason = None, f"compile failed: {type(exc).__name__}: {str(exc)[:300]}"
            log.warning("decode step runs eager: %s", self.reason)
            self._report()
            return self.fn(*args)
        self.calls += 1
        if first:
            self.compile_s = time.perf_counter() - started
            log.info("compiled the decode step in %.1f s (cache: %s)", self.compile_s, compile_cache_dir())
            self._report()
        return out
