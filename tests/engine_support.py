"""A tiny-model engine for `spd-lsp engine` subprocesses in tests (SPD_LSP_ENGINE_LOADER)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from spd_lsp.engine.local import LocalEngine
from spd_lsp.api import Loaded
from tests.tiny_models import tiny_model

REPO = Path(__file__).resolve().parent.parent
LOADER = "tests.engine_support:tiny_loaded"


def tiny_loaded(settings: Any) -> Loaded:
    if os.environ.get("SPD_TEST_ENGINE_BROKEN"):
        raise OSError("this engine was told not to start")
    time.sleep(float(os.environ.get("SPD_TEST_ENGINE_LOAD_S", "0")))  # a real model's load (~7 s), where a test needs it
    return Loaded(LocalEngine(tiny_model("llama")), {"name": "tiny-llama", "device": "cpu"}, "cpu")


class CompilingEngine(LocalEngine):
    """The tiny engine whose status says its step compiled once it answered a request (as the fast path's info dict
    says so when a background compile finishes)."""

    def __init__(self, loaded: Any, info: dict[str, Any]) -> None:
        super().__init__(loaded)
        self.info = info

    def prompt(self, *args: Any, **kwargs: Any) -> Any:  # every request's, batched or not
        self.info["compiled"] = True
        return super().prompt(*args, **kwargs)


def compiling_loaded(settings: Any) -> Loaded:
    info = {"name": "tiny-llama", "device": "cpu", "compiled": False}
    return Loaded(CompilingEngine(tiny_model("llama"), info), info, "cpu")


def engine_env(runtime: Path, **extra: str) -> dict[str, str]:
    """The environment of a front end or engine in tests: the tiny model, a private runtime dir."""
    return {**os.environ, "PYTHONPATH": str(REPO), "SPD_LSP_ENGINE_LOADER": LOADER,
            "XDG_RUNTIME_DIR": str(runtime), **extra}


def start_engine(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """`spd-lsp engine ARGS`; returns the process and where it listens (its first stdout line)."""
    process = subprocess.Popen([sys.executable, "-m", "spd_lsp.cli", "engine", *args], env=env, cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stdout:
        if "listening on" in line:
            return process, line.rsplit(" ", 1)[1].strip()
    process.kill()
    raise RuntimeError(f"engine did not start: {process.stderr.read()}")


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True  # exited, not yet reaped by the front end that started it
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


def building_loaded(settings: Any) -> Loaded:
    """The tiny engine as a first start leaves it: its fast plan waits for the kernel library being built."""
    return Loaded(LocalEngine(tiny_model("llama")), {"name": "tiny-llama", "device": "cpu",
                                                     "fastPlanState": "pending"}, "cpu")
