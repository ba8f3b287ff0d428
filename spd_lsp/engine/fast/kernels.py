"""Our C++ kernels for the CPU, built at run time and loaded once a process: `attention.cpp` (the decode step's
attention, `attention.py`), `matvec.cpp` (its int4 projections and int8 head, `matvec.py`), `prefill.cpp` (a
prompt's causal attention, `attention.py`) and `pointwise.cpp` (the eager forward's norms, rotary and SiLU in bf16,
`model.py`), one library.

It is built with torch's C++ extension loader (ninja, the C++ compiler inductor uses, inductor's vector ISA flags, and
AVX-512 BF16 where the CPU has it) into the compile cache, once per torch version, ISA and source; later starts load
the built library (2.2 s here, in the compile thread). `build()` is called by the step's compile (the background
compile thread, or the first call inline), before the step is traced: where it fails (no compiler, no ninja, a build
error) the step keeps SDPA and ATen's int4/int8 kernels, and `reason()` says why.
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

import torch

log = logging.getLogger(__name__)

SOURCES = [Path(__file__).with_name(name)
           for name in ("attention.cpp", "matvec.cpp", "prefill.cpp", "pointwise.cpp", "step.cpp", "amx.cpp",
                        "verdict.cpp")]
HEADERS = [Path(__file__).with_name(name) for name in ("attention.h", "matvec.h", "pointwise.h", "amx.h")]  # shared
KERNEL_ENV = "SPD_LSP_ATTENTION_KERNEL"  # "0": never build them (SDPA and ATen's kernels serve)
STALE_LOCK_S = 600.0  # a build lock older than this was left by a process that died (a build takes 22 s here)

_lock = threading.Lock()
_state: dict[str, str | bool] = {}  # "ready": True, or "reason": why not; "matvec": built with AVX-512 BF16


def ready() -> bool:
    """The kernels are built and loaded (never blocks)."""
    return _state.get("ready") is True


def matvec_ready() -> bool:
    """The kernels that need AVX-512 BF16 are built and loaded: the int4/int8 matvec ops and the prompt's causal
    attention (never blocks)."""
    return ready() and _state.get("matvec") is True


def reason() -> str | None:
    """Why the kernels are not there, once `build` failed."""
    value = _state.get("reason")
    return value if isinstance(value, str) else None


def build() -> bool:
    """Build (or load the built) kernels, once a process; True if `torch.ops.spd.decode_attention` can run (and the
    matvec ops where `matvec_ready()`)."""
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
            log.warning("decode kernels not built, SDPA and ATen's kernels serve the step: %s", _state["reason"])
            return False
        _state["ready"] = True
        return True


def _gist(message: str) -> str:
    """A build error's first line and the compiler's own `error:` lines (the command lines before them are long)."""
    lines = message.strip().splitlines()
    errors = [line.strip() for line in lines if "error:" in line]
    return " | ".join(([lines[0][:120]] if lines else []) + errors[:3])[:600]


def bf16_matvec() -> bool:
    """The CPU has AVX-512 BF16, which matvec.cpp's int4 and int8 kernels need (they are built without it as stubs)."""
    return torch.cpu._is_avx512_bf16_supported() if hasattr(torch.cpu, "_is_avx512_bf16_supported") else False


def amx_tiles() -> bool:
    """The CPU has AMX's bf16 tiles, which amx.cpp's int4 kernel needs (built without them as a stub)."""
    return torch.cpu._is_amx_tile_supported() if hasattr(torch.cpu, "_is_amx_tile_supported") else False


def amx_ready() -> bool:
    """amx.cpp's kernel is built with AMX and loaded (never blocks)."""
    return matvec_ready() and _state.get("amx") is True


def target() -> tuple[str, list[str], Path]:
    """The library's name, compiler flags and build directory (inductor's cache, which `use_compile_cache` points at
    the user cache): one per sources, flags (the vector ISA inductor picked, AVX-512 BF16) and torch version."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    isa = pick_vec_isa()
    flags = ["-O3", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-fassociative-math", "-fno-signed-zeros"]
    flags += [f"-D{macro}" for macro in isa.build_macro()] + isa.build_arch_flags().split() if isa else []
    flags += ["-mavx512bf16", "-mf16c"] if isa and "avx512" in str(isa) and bf16_matvec() else []
    flags += ["-mamx-tile", "-mamx-bf16"] if "-mavx512bf16" in flags and amx_tiles() else []
    sources = b"".join(source.read_bytes() for source in SOURCES + HEADERS)
    digest = hashlib.sha256(sources + " ".join(flags).encode() + torch.__version__.encode()).hexdigest()[:12]
    name = f"spd_kernels_{digest}"
    return name, flags, Path(cache_dir()) / "spd-kernels" / name


def _load() -> None:
    from torch.utils import cpp_extension

    _ninja_on_path()
    name, flags, directory = target()
    directory.mkdir(parents=True, exist_ok=True)
    _drop_stale_lock(directory / "lock")
    cpp_extension.load(name=name, sources=[str(source) for source in SOURCES], extra_cflags=flags,
                       build_directory=str(directory), extra_ldflags=["-fopenmp"], is_python_module=False, verbose=False)
    from spd_lsp.engine.fast import amx, attention, matvec

    torch.library.register_fake("spd::decode_attention")(attention._shape)
    torch.library.register_fake("spd_prefill::causal_attention")(attention._prompt_shape)
    matvec.register_fakes()
    _state["matvec"] = "-mavx512bf16" in flags
    _state["amx"] = "-mamx-tile" in flags
    amx.register_fakes()
    log.info("decode kernels loaded (%s)", directory)


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


