""":checkhealth spd in a real nvim against what goes wrong in practice: a virtual environment
that is gone, a wrong model path (the real server), and a shared engine that died (the real
server over a real `spd-lsp engine` with a tiny model)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.editors.nvim_driver import NVIM, Nvim
from tests.engine_support import engine_env, start_engine

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not Path(NVIM).exists(), reason=f"no nvim at {NVIM}"),
]

SERVER = [sys.executable, "-m", "spd_lsp.cli", "--stdio"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def health(nvim: Nvim, until: str) -> str:
    """The :checkhealth spd report, once it holds `until`."""
    nvim.api.command("checkhealth spd")
    return nvim.wait_for(lambda: until in (text := "\n".join(nvim.lines())) and text, f"{until!r} in the health report")


def server_status(nvim: Nvim) -> dict:
    return nvim.lua("""
        local client = vim.lsp.get_clients({ name = 'spd_lsp' })[1]
        local answer = client and client:request_sync('workspace/executeCommand', { command = 'spd.status', arguments = {} }, 5000)
        return answer and answer.result or vim.empty_dict()
    """)


def test_a_venv_whose_python_is_gone_is_an_error_with_how_to_recreate_it(workspace: Path) -> None:
    """The usual `.venv/bin/spd-lsp` entry point, its venv's python deleted: the shell finds the
    script, but it cannot start."""
    entry = workspace / ".venv" / "bin" / "spd-lsp"
    entry.parent.mkdir(parents=True)
    gone = workspace / ".venv-old" / "bin" / "python3"
    entry.write_text(f"#!{gone}\nimport sys\nfrom spd_lsp.cli import main\nsys.exit(main())\n")
    entry.chmod(0o755)
    nvim = Nvim({"debounce_ms": 20}, workspace)  # no cmd: finds .venv/bin/spd-lsp
    try:
        nvim.api.command(f"edit {workspace / 'a.py'}")
        report = health(nvim, "cannot start")
        assert f"ERROR the server {entry} cannot start: its Python interpreter {gone} is missing" in report, report
        assert "Recreate the virtual environment: Install the server: `python3 -m venv .venv" in report
    finally:
        nvim.close()


def test_a_wrong_model_path_is_an_error_naming_the_path_and_what_to_set(workspace: Path) -> None:
    model = workspace / "models" / "missing.gguf"
    nvim = Nvim({"cmd": SERVER, "debounce_ms": 20, "model": str(model), "ngrams": {"enabled": False}}, workspace)
    try:
        nvim.open(workspace / "a.py", timeout=30)
        nvim.wait_for(lambda: server_status(nvim).get("error"), "the failed load", timeout=60)
        report = health(nvim, "model: failed to load")
        # The default shared engine loads the model and says why it could not, in the window's error
        error = next(line for line in report.splitlines() if "ERROR model: failed to load:" in line)
        assert "the model could not be loaded, completions are off:" in error and f"model '{model}' not found" in error
        assert "Check `model` in require(\"spd\").setup{}" in report and "Remove `model` to use the bundled" in report
        assert "OK server: " in report, "the server itself is fine"
    finally:
        nvim.close()


@pytest.fixture
def runtime() -> Iterator[Path]:
    root = Path(f"/tmp/spd-nvim-{os.getpid()}-{time.monotonic_ns()}")  # short: socket paths have 107 bytes
    root.mkdir(mode=0o700)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_a_dead_shared_engine_is_an_error_with_how_to_start_it(workspace: Path, runtime: Path) -> None:
    socket = runtime / "engine.sock"
    process, _ = start_engine(["--socket", str(socket)], engine_env(runtime))
    settings = {"cmd": SERVER, "debounce_ms": 20, "engine": f"unix:{socket}", "ngrams": {"enabled": False}}
    nvim = Nvim(settings, workspace)
    try:
        nvim.open(workspace / "a.py", timeout=30)
        nvim.wait_for(lambda: server_status(nvim).get("model"), "the engine's hello", timeout=60)
        report = health(nvim, "engine:")
        assert f"OK engine: shared at unix:{socket} (connected)" in report, report

        process.kill()
        process.wait()
        nvim.wait_for(lambda: server_status(nvim)["engine"]["connected"] is False, "the closed connection")
        report = health(nvim, "not connected")
        assert f"ERROR engine: shared at unix:{socket} is not connected (it stopped or died); 0 request(s) got no drafts" in report, report
        assert "Start the engine: `spd-lsp engine --socket PATH`" in report
    finally:
        nvim.close()
        if process.poll() is None:
            process.kill()
            process.wait()
