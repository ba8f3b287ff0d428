"""Drive a real headless Neovim with the spd plugin over msgpack-RPC (pynvim).

`nvim.input()` goes through typeahead like a user typing, so mappings and
insert-mode autocommands fire as they do interactively; RPC calls are answered
between keys, which is how the tests read extmarks and state.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pynvim

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "editor-integrations" / "neovim"
INIT = Path(__file__).with_name("nvim_init.lua")
FAKE_SERVER = Path(__file__).with_name("fake_spd_server.py")
NVIM = os.environ.get("SPD_TEST_NVIM") or str(REPO / ".venv" / "bin" / "nvim")

T = TypeVar("T")

_GHOST_LUA = """
local ns = vim.api.nvim_get_namespaces()['spd.ghost']
local out = { lines = {} }
if not ns then return out end
local function join(chunks)
  return table.concat(vim.tbl_map(function(c) return c[1] end, chunks or {}))
end
for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
  local d = mark[4]
  if d.virt_text_pos == 'inline' then
    out.text, out.row, out.col = join(d.virt_text), mark[2], mark[3]
    for _, line in ipairs(d.virt_lines or {}) do table.insert(out.lines, join(line)) end
  elseif d.virt_text_pos == 'eol' then
    out.counter = vim.trim(join(d.virt_text))
  end
end
return out
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Nvim:
    """One `nvim --embed --headless --clean -u nvim_init.lua` with `setup(options)` applied;
    or, with `home` (XDG_* and other variables), nvim as a user starts it: their init.lua."""

    def __init__(self, setup: dict[str, Any] | None, cwd: Path, *, home: dict[str, str] | None = None) -> None:
        env = {"SPD_PLUGIN_DIR": str(PLUGIN_DIR), "SPD_TEST_SETUP": json.dumps(setup) if setup is not None else "",
               **(home or {})}
        args = ["--clean", "-u", str(INIT)] if home is None else []
        saved = {key: os.environ.get(key) for key in env}
        saved_cwd = os.getcwd()
        os.environ.update(env)
        os.chdir(cwd)
        try:
            self.api = pynvim.attach("child", argv=[NVIM, "--embed", "--headless", *args])
            self.pid: int = self.api.call("getpid")
        finally:
            os.chdir(saved_cwd)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def close(self) -> None:
        """Quits, and kills nvim if a prompt blocks it (a failed test must not hang the run)."""
        self.api.command("qa!", async_=True)
        deadline = time.monotonic() + 3
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)
        self.api.close()

    def lua(self, code: str, *args: Any) -> Any:
        return self.api.exec_lua(code, *args)

    def input(self, keys: str) -> None:
        self.api.input(keys)

    def wait_for(self, probe: Callable[[], T], what: str, timeout: float = 10.0) -> T:
        """Polls `probe` until it returns something truthy."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.02)

    def ghost(self) -> dict[str, Any]:
        """The ghost text on screen: text (inline part), lines (virtual lines), counter ("2/3")."""
        return self.lua(_GHOST_LUA)

    def wait_ghost(self, text: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
        return self.wait_for(
            lambda: (g := self.ghost()).get("text") and (text is None or g["text"] == text) and g,
            f"ghost text {text!r}",
            timeout,
        )

    def attached(self) -> bool:
        return bool(self.lua("return #vim.lsp.get_clients({ bufnr = 0, name = 'spd_lsp' }) > 0"))

    def open(self, path: Path, timeout: float = 10.0) -> None:
        self.api.command(f"edit {path}")
        self.wait_for(self.attached, "spd_lsp to attach", timeout)

    def line(self) -> str:
        return self.api.current.line

    def lines(self) -> list[str]:
        return self.api.current.buffer[:]

    def mode(self) -> str:
        return self.api.api.get_mode()["mode"]

    def float_text(self) -> str:
        """The text of the floating windows on screen (e.g. :SpdStatus)."""
        return self.lua(
            """
            local out = {}
            for _, win in ipairs(vim.api.nvim_list_wins()) do
              if vim.api.nvim_win_get_config(win).relative ~= '' then
                vim.list_extend(out, vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false))
              end
            end
            return table.concat(out, '\\n')
            """
        )

    def messages(self) -> str:
        return self.api.api.exec2("messages", {"output": True})["output"]
