"""The one-token decode step's attention as a CPU kernel of our own (`attention.cpp`, `torch.ops.spd.decode_attention`).

Why: in the compiled step, SDPA's CPU kernel took ~117 us a layer (3.5 ms of a 14 ms step: 3 query heads per key/value
head, 3 heads on 2 threads, and the masked bucket read whole) for ~0.4 MB of keys and values. The kernel reads only the
live columns, splits them in chunks over the threads, and joins the chunks' softmaxes (docs/performance-step.md,
round 9).

It is built at run time (torch's C++ extension loader, ninja, the C++ compiler inductor uses, inductor's vector ISA
flags) into the compile cache, once per torch version, ISA and source; later starts load the built library (2.2 s here, in the compile thread).
`build()` is called by the step's compile (the background compile thread, or the first call inline), before the step is
traced: where it fails (no compiler, no ninja, a build error) the step keeps SDPA and `reason()` says why.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("attention.cpp")
KERNEL_ENV = "SPD_LSP_ATTENTION_KERNEL"  # "0": never build it (SDPA serves)
STALE_LOCK_S = 600.0  # a build lock older than this was left by a process that died (a build takes 22 s here)

_lock = threading.Lock()
_state: dict[str, str | bool] = {}  # "ready": True, or "reason": why not


class Upto(NamedTuple):
    """A decode step's mask given as its column: every row attends to columns 0..column of the cache's buffers (the
    step's own key/value written there), nothing after it. `FastLM._attend` runs `decode_attention` on it."""
    column: torch.Tensor


def ready() -> bool:
    """The kernel is built and loaded (never blocks)."""
    return _state.get("ready") is True


def reason() -> str | None:
    """Why the kernel is not there, once `build` failed."""
    value = _state.get("reason")
    return value if isinstance(value, str) else None


def build() -> bool:
    """Build (or load the built) kernel, once a process; True if `torch.ops.spd.decode_attention` can run."""
    with _lock:
        if "ready" in _state or "reason" in _state:
            return ready()
        if os.environ.get(KERNEL_ENV, "1") == "0":
            _state["reason"] = f"{KERNEL_ENV}=0"
            return False
        try:
            _load()
        except Exception as exc:  # noqa: BLE001 - no compiler, no ninja, a build error: SDPA serves
            _state["reason"] = f"{type(exc).__name__}: {_gist(str(exc))}"
            log.warning("decode attention kernel not built, SDPA serves the step: %s", _state["reason"])
            return False
        _state["ready"] = True
        return True


def _gist(message: str) -> str:
    """A build error's first line and the compiler's own `error:` lines (the command lines before them are long)."""
    lines = message.strip().splitlines()
    errors = [line.strip() for line in lines if "error:" in line]
    return " | ".join(([lines[0][:120]] if lines else []) + errors[:3])[:600]


def target() -> tuple[str, list[str], Path]:
    """The kernel's library name, compiler flags and build directory (inductor's cache, which `use_compile_cache`
    points at the user cache): one per source, flags (the vector ISA inductor picked) and torch version."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    isa = pick_vec_isa()
    flags = ["-O3", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-fassociative-math", "-fno-signed-zeros"]
    flags += [f"-D{macro}" for macro in isa.build_macro()] + isa.build_arch_flags().split() if isa else []
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join(flags).encode() + torch.__version__.encode()).hexdigest()[:12]
    name = f"spd_decode_attention_{digest}"
    return name, flags, Path(cache_dir()) / "spd-kernels" / name


def _load() -> None:
    from torch.utils import cpp_extension

    _ninja_on_path()
    name, flags, directory = target()
    directory.mkdir(parents=True, exist_ok=True)
    _drop_stale_lock(directory / "lock")
    cpp_extension.load(name=name, sources=[str(SOURCE)], extra_cflags=flags, build_directory=str(directory),
                       extra_ldflags=["-fopenmp"], is_python_module=False, verbose=False)
    torch.library.register_fake("spd::decode_attention")(_shape)
    log.info("decode attention kernel loaded (%s)", directory)


def _drop_stale_lock(lock: Path) -> None:
    """torch's loader takes `lock` in the build directory around every load, built or not, and a second process
    waits for it to go, without end: a process killed while it built (22 s the first time) would leave every later
    start's compile thread waiting. A lock older than STALE_LOCK_S is taken as such and removed."""
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return
    if age > STALE_LOCK_S:
        log.warning("removing a stale build lock (%.0f s old): %s", age, lock)
        lock.unlink(missing_ok=True)


def _ninja_on_path() -> None:
    """torch's loader runs `ninja` from PATH; pip's `ninja` (a dependency) lands beside this Python, which a venv's
    Python run by its path does not put on PATH: add that directory where no other ninja is found."""
    if shutil.which("ninja") is None:
        here = Path(sys.executable).parent
        if (here / "ninja").exists():
            os.environ["PATH"] = f"{here}{os.pathsep}{os.environ.get('PATH', '')}"


def _shape(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, column: torch.Tensor, scale: float) -> torch.Tensor:
    """What the op returns, for tracing: a tensor like q (contiguous)."""
    return q.new_empty(q.shape)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, column: torch.Tensor, scale: float
                     ) -> torch.Tensor:
    """[B, H, G, D]: softmax(q kᵀ · scale) v over columns 0..column of k/v [B, H, S, D] (`build` first)."""
    return torch.ops.spd.decode_attention(q, k, v, column, scale)
