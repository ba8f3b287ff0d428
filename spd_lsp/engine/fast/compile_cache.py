"""Where compiled artifacts are kept: inductor's (and Triton's) caches under the user cache, and what happens where
that cannot be written (the step runs eager, said once)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import platformdirs

log = logging.getLogger(__name__)


def compile_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("spd-lsp")) / "torch-compile"


_cache_problem: list[str] = []  # why the compile cache cannot be written (then the step runs eager)


def use_compile_cache() -> Path:
    """Point inductor's (and Triton's) caches at the user cache, unless the environment already does. Called when
    spd_lsp.engine.model is imported: inductor fixes its directory the first time anything asks for it.

    A cache that cannot be written (a full disk, a file where its directory should be, no permission): the step
    runs eager (`compile_cache_problem` says why; `compile.why_not` returns it), and inductor is pointed at the
    nearest directory that exists, which torch only checks when `torch._dynamo` is imported (it raised there,
    and the engine exited, on a cache directory it could not create)."""
    root = compile_cache_dir()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(root / "triton"))
    inductor = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    problem = _unwritable(inductor)
    if problem and not _cache_problem:
        _cache_problem.append(f"cannot write the compile cache under {inductor}: {problem}; the decode step runs "
                              "eager (free space there or point TORCHINDUCTOR_CACHE_DIR at another disk)")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(_existing_directory(inductor))
        log.warning("%s", _cache_problem[0])
    return root


def compile_cache_problem() -> str | None:
    """Why the compile cache cannot be written, if it cannot (`use_compile_cache` found it)."""
    return _cache_problem[0] if _cache_problem else None


def _unwritable(directory: Path) -> str | None:
    """Why `directory` cannot hold the compile cache (made if missing, a file written there), or None."""
    import tempfile

    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()  # a full disk refuses the write itself (space is reserved at write time)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _existing_directory(path: Path) -> Path:
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path
