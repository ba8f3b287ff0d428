"""Building and loading the kernel library (`torch.ops.spd`), once a process.

It is built with torch's C++ extension loader (ninja, the C++ compiler inductor uses, inductor's vector ISA flags, and
AVX-512 BF16 / AMX where the CPU has them) into the compile cache, one library per sources, flags and torch version;
later starts load the built library (~2 s). `build()` is called off the load (the background compile thread, or a
first call inline); where it fails (no compiler, no ninja, a build error) the plan falls back to what torch's own
kernels serve, and `reason()` says why.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import fasteners
import torch

if TYPE_CHECKING:
    from spd_lsp.engine.cpu import CpuProfile

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
# The sources, compiled as two units that include them (a unity build): torch's headers cost the compiler ~7 s a
# unit, more than most files' own code (CHANGELOG: a build's time). The fused step is the longest file and a unit of
# its own, so on two cores the two finish together.
UNITS = {"spd_step": ("step.cpp",),
         "spd_ops": ("matvec.cpp", "prompt.cpp", "attention.cpp", "pointwise.cpp", "amx.cpp", "blocks.cpp",
                     "verdict.cpp")}
SOURCES = [HERE / name for names in UNITS.values() for name in names]
BUILD_LOCK = "build.lock"  # `_one_build`'s; torch's loader's own is "lock"
HEADERS = [HERE / name for name in ("attention.h", "matvec.h", "pointwise.h", "amx.h", "blocks.h", "int8x.h")]  # shared

_lock = threading.Lock()
# "ready": True, or "reason": why not; "features": what the built library's ops can do on this CPU (`features`).
_state: dict[str, object] = {}


def ready() -> bool:
    """The library is built and loaded (never blocks)."""
    return _state.get("ready") is True


def features() -> frozenset[str]:
    """What the loaded library runs (empty until it is): "attention", "pointwise" and "blocks" everywhere it builds;
    "bf16-dot" (the matvec ops, the prompt's attention, the fused step: AVX-512 BF16), "int8-dot" (the K-quants'
    decode on int8 activations: AVX-512 VNNI beside BF16), "avx2-int8" (every block kind's decode matvec on int8
    activations: AVX2 without AVX-512 BF16, `int8x.h`) and "amx" (AMX's tiles)."""
    value = _state.get("features")
    return value if isinstance(value, frozenset) else frozenset()


def reason() -> str | None:
    """Why the library is not there, once `build` failed."""
    value = _state.get("reason")
    return value if isinstance(value, str) else None


def build() -> bool:
    """Build (or load the built) library, once a process; True if it is loaded."""
    with _lock:
        if "ready" in _state or "reason" in _state:
            return ready()
        try:
            _load()
        except Exception as exc:  # noqa: BLE001 - no compiler, no ninja, a build error: torch's kernels serve
            _state["reason"] = f"{type(exc).__name__}: {_gist(str(exc))}"
            log.warning("kernels not built, torch's own kernels serve: %s", _state["reason"])
            return False
        _state["ready"] = True
        return True


def _gist(message: str) -> str:
    """A build error's first line and the compiler's own `error:` lines (the command lines before them are long)."""
    lines = message.strip().splitlines()
    errors = [line.strip() for line in lines if "error:" in line]
    return " | ".join(([lines[0][:120]] if lines else []) + errors[:3])[:600]


def bf16_dot() -> bool:
    """The CPU has AVX-512 BF16, which the matvec ops, the prompt's attention and the fused step need."""
    return torch.cpu._is_avx512_bf16_supported() if hasattr(torch.cpu, "_is_avx512_bf16_supported") else False


def amx_tiles() -> bool:
    """The CPU has AMX's bf16 tiles, which amx.cpp's kernels need."""
    return torch.cpu._is_amx_tile_supported() if hasattr(torch.cpu, "_is_amx_tile_supported") else False


# The vector ISA flags of each CPU profile (`engine/cpu.py`), as inductor passes them, and ATen's macros that pick its
# `at::vec` implementation: the library is built for the ISA torch itself runs (ATEN_CPU_CAPABILITY can lower it).
ISA_FLAGS = {
    "avx512": (["CPU_CAPABILITY=AVX512", "CPU_CAPABILITY_AVX512"], ["-mavx512f", "-mavx512dq", "-mavx512vl",
                                                                    "-mavx512bw", "-mfma", "-mf16c"]),
    "avx2": (["CPU_CAPABILITY=AVX2", "CPU_CAPABILITY_AVX2"], ["-mavx2", "-mfma", "-mf16c"]),
    "neon": ([], []),
    "scalar": ([], []),
}


def profile() -> "CpuProfile":
    """This machine's CPU profile, at the vector ISA torch runs here."""
    from spd_lsp.engine.cpu import CpuProfile

    return CpuProfile.of(torch.backends.cpu.get_cpu_capability())


def target() -> tuple[str, list[str], Path]:
    """The library's name, compiler flags and build directory (under inductor's cache, which `use_compile_cache`
    points at the user cache): one per sources, flags (the CPU's vector ISA, AVX-512 BF16, AMX) and torch version."""
    cpu = profile()
    isa = "avx512" if cpu.isa in ("amx", "avx512-bf16", "avx512") else cpu.isa
    macros, arch = ISA_FLAGS.get(isa, ([], []))
    flags = ["-O3", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-fassociative-math", "-fno-signed-zeros"]
    flags += [f"-D{macro}" for macro in macros] + arch
    flags += ["-mavx512bf16"] if cpu.bf16_dot else []
    flags += ["-mavx512vnni"] if cpu.int8_dot else []
    flags += ["-mamx-tile", "-mamx-bf16"] if cpu.amx else []
    sources = b"".join(source.read_bytes() for source in SOURCES + HEADERS)
    digest = hashlib.sha256(sources + " ".join(flags).encode() + torch.__version__.encode()).hexdigest()[:12]
    name = f"spd_kernels_{digest}"
    return name, flags, cache_root() / "spd-kernels" / name


def cache_root() -> Path:
    """Inductor's cache directory: where the environment points it (the loader points it at the user cache:
    `engine/fast/compile_cache.py`), else that same user cache; found without importing inductor (2 s of a start:
    it imports dynamo)."""
    import platformdirs

    configured = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return Path(configured) if configured else Path(platformdirs.user_cache_dir("spd-lsp")) / "torch-compile" / "inductor"


def built() -> bool:
    """The library for this machine's target is in the cache: `build` only loads it (~1 s, no compiler run)."""
    name, _, directory = target()
    return (directory / f"{name}.so").is_file()


def _load() -> None:
    from torch.utils import cpp_extension

    from spd_lsp.engine.kernels import amx, attention, blocks, matvec, prompt, step

    name, flags, directory = target()
    library = directory / f"{name}.so"

    def compile_and_load(*, anew: bool = False) -> None:
        _ninja_on_path()
        with _one_build(directory):
            if anew:  # what is left of a half-made build, all but the lock file held now
                for path in directory.iterdir():
                    if path.is_dir():
                        shutil.rmtree(path)
                    elif path.name != BUILD_LOCK:
                        path.unlink(missing_ok=True)
            elif library.is_file():  # built by the process this one waited for
                torch.ops.load_library(str(library))
                return
            cpp_extension.load(name=name, sources=_units(directory), extra_cflags=flags,
                               build_directory=str(directory), extra_ldflags=["-fopenmp"], is_python_module=False,
                               verbose=False)

    try:
        if library.is_file():
            torch.ops.load_library(str(library))  # built by an earlier process for this very target: no ninja run
        else:
            compile_and_load()
    except OSError as exc:  # a library or build directory left half-made (a process killed while it wrote, two
        log.warning("the kernel library in %s could not be loaded (%s): building it again", directory, exc)
        compile_and_load(anew=True)  # builds at once): made again from nothing, once
    for binding in (attention, prompt, matvec, step, amx, blocks):
        binding.register_fakes()
    provided = {"attention", "pointwise", "verdict", "blocks"}
    if "-mavx512bf16" in flags:
        provided.add("bf16-dot")
    if "-mavx512vnni" in flags:
        provided.add("int8-dot")
    if "-mavx2" in flags or ("-mavx512f" in flags and "-mavx512bf16" not in flags):
        provided.add("avx2-int8")
    if "-mamx-tile" in flags:
        provided.add("amx")
    _state["features"] = frozenset(provided)
    log.info("kernels loaded (%s)", directory)


def _units(directory: Path) -> list[str]:
    """The unity sources of `UNITS`, written into the build directory: each includes its files by path."""
    paths = []
    for unit, names in UNITS.items():
        path = directory / f"{unit}.cpp"
        text = "".join(f'#include "{HERE / name}"\n' for name in names)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        paths.append(str(path))
    return paths


@contextmanager
def _one_build(directory: Path) -> Iterator[None]:
    """One build of `directory` at a time across processes, by an inter-process lock (as the engine's start takes,
    `remote/daemon.py`) that the kernel drops with the process holding it. torch's loader takes its own lock file
    (`lock`) in the build directory and waits, without end, while it exists: one found while holding ours was left by
    a process that exited or was killed mid-build (a daemon build thread dies with its process), and is removed."""
    directory.mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(str(directory / BUILD_LOCK)):
        left = directory / "lock"
        if left.exists():
            log.warning("removing a build lock left by a process that stopped building: %s", left)
            left.unlink(missing_ok=True)
        yield


def _ninja_on_path() -> None:
    """torch's loader runs `ninja` from PATH; pip's `ninja` (a dependency) lands beside this Python, which a venv's
    Python run by its path does not put on PATH: add that directory where no other ninja is found."""
    if shutil.which("ninja") is None:
        here = Path(sys.executable).parent
        if (here / "ninja").exists():
            os.environ["PATH"] = f"{here}{os.pathsep}{os.environ.get('PATH', '')}"


if __name__ == "__main__":  # `python -m spd_lsp.engine.kernels.build`: build now (scripts/setup.sh does, once)
    started = time.perf_counter()
    ok = build()
    print(f"spd-lsp kernels: {'loaded' if ok else 'not built'} in {time.perf_counter() - started:.1f} s"
          + (f" ({reason()})" if not ok else f" ({target()[2]}; {', '.join(sorted(features()))})"))
    sys.exit(0 if ok else 1)
