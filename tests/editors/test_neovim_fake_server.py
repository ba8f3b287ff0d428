"""The Neovim plugin end to end: real headless nvim 0.11, real LSP traffic, fake drafts.

The fake server (tests/editors/fake_spd_server.py) answers each inline request with
`k` drafts "<word under cursor><suffix>", so what the ghost text must show is known.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.editors.nvim_driver import FAKE_SERVER, NVIM, Nvim

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(60),
    pytest.mark.skipif(not Path(NVIM).exists(), reason=f"no nvim at {NVIM}"),
]

FAKE_CMD = [sys.executable, str(FAKE_SERVER)]
SUFFIXES = ["_alpha(x)", "_beta(y, z)", "_gamma()", "_delta"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def start(workspace: Path, **options: Any) -> Nvim:
    nvim = Nvim({"cmd": FAKE_CMD, "debounce_ms": 20, **options}, workspace)
    nvim.open(workspace / "walk.py")
    return nvim


@pytest.fixture
def nvim(workspace: Path) -> Iterator[Nvim]:
    session = start(workspace)
    yield session
    session.close()


def status(nvim: Nvim) -> dict[str, Any]:
    """What the fake server saw, straight from spd.status."""
    return nvim.lua(
        """
        local client = vim.lsp.get_clients({ name = 'spd_lsp' })[1]
        return client:request_sync('workspace/executeCommand', { command = 'spd.status', arguments = {} }, 5000).result
        """
    )


def test_typing_shows_the_first_draft_as_ghost_text_with_a_counter(nvim: Nvim) -> None:
    nvim.input("ix = foo")
    ghost = nvim.wait_ghost("_alpha(x)")
    assert ghost["counter"] == "1/3"
    assert (ghost["row"], ghost["col"]) == (0, len("x = foo"))
    assert nvim.line() == "x = foo", "ghost text must not touch the buffer"


def test_next_and_previous_cycle_through_k_distinct_drafts(nvim: Nvim) -> None:
    nvim.input("ix = foo")
    seen = [nvim.wait_ghost()["text"]]
    for expected in (SUFFIXES[1], SUFFIXES[2], SUFFIXES[0]):
        nvim.input("<M-]>")
        seen.append(nvim.wait_ghost(expected)["text"])
    assert seen == [SUFFIXES[0], SUFFIXES[1], SUFFIXES[2], SUFFIXES[0]]
    nvim.input("<M-[>")
    assert nvim.wait_ghost(SUFFIXES[2])["counter"] == "3/3"


def test_accept_inserts_exactly_the_shown_draft_and_reports_it(nvim: Nvim) -> None:
    nvim.input("ix = foo")
    nvim.wait_ghost()
    nvim.input("<M-]>")
    shown = nvim.wait_ghost("_beta(y, z)")["text"]
    nvim.input("<Tab>")
    nvim.wait_for(lambda: nvim.line() != "x = foo", "the draft to be inserted")
    assert nvim.line() == "x = foo" + shown
    assert tuple(nvim.api.current.window.cursor) == (1, len(nvim.line()))
    assert nvim.mode() == "i"
    accepted = nvim.wait_for(lambda: status(nvim)["acceptedArguments"], "spd.accept to reach the server")
    assert accepted == [[{"draft": 1, "text": "foo_beta(y, z)"}]]


def manual(workspace: Path) -> Nvim:
    """Drafts only on <M-]>: what is shown after an edit comes from the drafts already there."""
    return start(workspace, auto_trigger=False)


def test_accept_word_takes_one_word_and_keeps_the_rest(workspace: Path) -> None:
    nvim = manual(workspace)
    try:
        nvim.input("iy = qu<M-]>")
        nvim.wait_ghost("_alpha(x)")
        nvim.input("<M-Right>")
        nvim.wait_for(lambda: nvim.line() == "y = qu_alpha", "one word accepted")
        assert nvim.ghost()["text"] == "(x)"
    finally:
        nvim.close()


def test_typing_through_a_draft_keeps_it_shown_without_a_new_request(workspace: Path) -> None:
    nvim = manual(workspace)
    try:
        nvim.input("ix = foo<M-]>")
        nvim.wait_ghost("_alpha(x)")
        nvim.input("_al")
        nvim.wait_for(lambda: nvim.line() == "x = foo_al", "typing")
        assert nvim.ghost()["text"] == "pha(x)"
        nvim.input("z")
        nvim.wait_for(lambda: nvim.line() == "x = foo_alz", "typing")
        assert not nvim.ghost().get("text"), "a draft the typing contradicts must go"
        assert status(nvim)["requests"] == 1
    finally:
        nvim.close()


def test_dismiss_clears_and_tab_then_falls_through(nvim: Nvim) -> None:
    nvim.input("ix = foo")
    nvim.wait_ghost()
    nvim.input("<C-]>")
    nvim.wait_for(lambda: not nvim.ghost().get("text"), "ghost text to clear")
    time.sleep(0.2)  # several debounce periods: nothing comes back on its own
    assert not nvim.ghost().get("text")
    nvim.input("<Tab>")
    # Python's ftplugin sets expandtab and softtabstop=4: the key's own meaning.
    nvim.wait_for(lambda: nvim.line() == "x = foo ", "<Tab> to insert indentation")


def test_keys_fall_through_to_the_mapping_they_replaced(workspace: Path) -> None:
    nvim = Nvim(None, workspace)
    try:
        nvim.api.command("inoremap <Tab> TAB!")
        nvim.lua("require('spd').setup(...)", {"cmd": FAKE_CMD, "auto_trigger": False})
        nvim.open(workspace / "walk.py")
        nvim.input("ix<Tab>")
        nvim.wait_for(lambda: nvim.line() == "xTAB!", "the previous <Tab> mapping to run")
    finally:
        nvim.close()


def test_popup_menu_hides_the_ghost_text(nvim: Nvim) -> None:
    nvim.input("ifoobar = 1<CR>foobaz = 2<CR>foo")
    nvim.wait_ghost("_alpha(x)")
    nvim.input("<C-n>")
    nvim.wait_for(lambda: nvim.lua("return vim.fn.pumvisible()") == 1, "the popup menu")
    nvim.wait_for(lambda: not nvim.ghost().get("text"), "ghost text to hide under the popup menu")
    nvim.input("<C-e>")
    nvim.wait_ghost()


def test_typing_fast_sends_one_debounced_request(workspace: Path) -> None:
    nvim = start(workspace, debounce_ms=150)
    try:
        nvim.input("iresult = compute")
        nvim.wait_ghost("_alpha(x)")
        assert status(nvim)["requests"] == 1
    finally:
        nvim.close()


def test_typing_cancels_the_request_in_flight_and_shows_the_fresh_drafts(workspace: Path) -> None:
    nvim = start(workspace, cmd=[*FAKE_CMD, "--delay-ms", "600"])
    try:
        nvim.input("ix = foo")
        nvim.wait_for(lambda: status(nvim)["requests"] == 1, "the first request")
        nvim.input("d")
        nvim.wait_ghost("_alpha(x)")
        seen = status(nvim)
        assert (seen["requests"], seen["cancelled"]) == (2, 1)
        nvim.input("<Tab>")
        nvim.wait_for(lambda: nvim.line() == "x = food_alpha(x)", "the fresh draft accepted")
    finally:
        nvim.close()


def test_multiline_draft_shows_virtual_lines_and_accepts_them(workspace: Path) -> None:
    nvim = start(workspace, multiline=True)
    try:
        nvim.input("idef run")
        ghost = nvim.wait_ghost("_block():")
        assert ghost["lines"] == ["    return 42"]
        nvim.input("<Tab>")
        nvim.wait_for(lambda: len(nvim.lines()) == 2, "two lines inserted")
        assert nvim.lines() == ["def run_block():", "    return 42"]
        assert tuple(nvim.api.current.window.cursor) == (2, len("    return 42"))
    finally:
        nvim.close()


def test_setup_options_reach_the_server_and_a_second_setup_updates_them(nvim: Nvim) -> None:
    settings = status(nvim)["settings"]
    assert settings["k"] == 3 and settings["maxTokens"] == 10 and settings["decoding"] == "superposed"
    options = {"cmd": FAKE_CMD, "debounce_ms": 20, "k": 4, "max_tokens": 7, "ngrams": {"enabled": False}}
    nvim.lua("require('spd').setup(...)", options)
    nvim.wait_for(lambda: status(nvim)["configChanges"] >= 2, "didChangeConfiguration")
    settings = status(nvim)["settings"]
    assert (settings["k"], settings["maxTokens"], settings["ngrams"]) == (4, 7, {"enabled": False})
    nvim.input("ix = foo")
    assert nvim.wait_ghost()["counter"] == "1/4"


def test_unknown_setup_option_is_an_error(nvim: Nvim) -> None:
    with pytest.raises(Exception, match="unknown option \"maxTokens\""):
        nvim.lua("require('spd').setup({ maxTokens = 5 })")


def float_height(nvim: Nvim) -> int:
    return nvim.lua("for _, w in ipairs(vim.api.nvim_list_wins()) do if vim.api.nvim_win_get_config(w).relative ~= '' "
                    "then return vim.api.nvim_win_get_height(w) end end")


def test_spd_status_shows_the_servers_summary_and_with_bang_every_field(nvim: Nvim) -> None:
    nvim.api.command("SpdStatus")
    text = nvim.wait_for(nvim.float_text, "the status window")
    assert text == "Client:   on; filetype python: completed\n" + status(nvim)["summary"], "the client's line, then the server's own"
    for expected in ("Model:    fake-model on cpu, eager", "Store:    /tmp/fake: 0 files, 0 tokens",
                     "Latency:  p50 12 ms, p95 20 ms"):
        assert expected in text
    assert float_height(nvim) == len(text.splitlines()), "every line shown"
    nvim.lua("for _, w in ipairs(vim.api.nvim_list_wins()) do if vim.api.nvim_win_get_config(w).relative ~= '' "
             "then vim.api.nvim_win_close(w, true) end end")

    nvim.api.command("SpdStatus!")
    text = nvim.wait_for(nvim.float_text, "the status window with every field")
    for expected in ("model.name: fake-model", "model.device: cpu", "latencyMs.total.p50: 12", "accepted: 0",
                     "stores[1].root: /tmp/fake", "stores[1].files: 0"):
        assert expected in text
    assert "{" not in text, "no raw Lua tables"
    assert "summary" not in text, "the summary is not repeated among the fields"
    assert float_height(nvim) == len(text.splitlines()), "every line shown"


def test_spd_index_reports_progress_and_what_the_store_holds(nvim: Nvim) -> None:
    nvim.api.command("SpdIndex")
    totals = "SPD: /tmp/fake is indexed: 3 files, 120 tokens in the store"
    text = nvim.wait_for(lambda: totals in (m := nvim.messages()) and m, "the end of indexing")
    assert "SPD: Indexing workspace: this run: 3 files, 120 tokens" in text
    assert "SPD: indexing the workspace" in text
    nvim.api.command("messages clear")
    nvim.api.command("SpdIndex")  # up to date: nothing changed, which must not read as nothing indexed
    text = nvim.wait_for(lambda: totals in (m := nvim.messages()) and m, "the end of the second indexing")
    assert text.index("this run: 0 files, 0 tokens") < text.index(totals)


def test_spd_toggle_turns_ghost_text_off_and_on(nvim: Nvim) -> None:
    nvim.api.command("SpdToggle")
    nvim.input("ix = foo")
    time.sleep(0.3)
    assert not nvim.ghost().get("text")
    nvim.input("<Esc>")
    nvim.api.command("SpdToggle")
    nvim.input("a_")
    assert nvim.wait_ghost()["text"] == "_alpha(x)"


def test_lsp_config_file_works_with_vim_lsp_enable(workspace: Path) -> None:
    nvim = Nvim(None, workspace)
    try:
        nvim.lua("vim.lsp.config('spd_lsp', { cmd = ... }); vim.lsp.enable('spd_lsp')", FAKE_CMD)
        nvim.open(workspace / "main.py")
        root = nvim.lua("return vim.lsp.get_clients({ name = 'spd_lsp' })[1].root_dir")
        assert Path(root) == workspace
        assert nvim.lua("return vim.fn.exists(':SpdStatus')") == 2
    finally:
        nvim.close()


def test_without_vim_lsp_config_as_on_0_10_the_plugin_starts_the_server_itself(workspace: Path) -> None:
    nvim = Nvim(None, workspace)
    try:
        nvim.lua("vim.lsp.config = nil; require('spd').setup(...)", {"cmd": FAKE_CMD, "debounce_ms": 20})
        nvim.open(workspace / "sub.py")
        assert Path(nvim.lua("return vim.lsp.get_clients({ name = 'spd_lsp' })[1].root_dir")) == workspace
        nvim.input("ix = foo")
        assert nvim.wait_ghost()["text"] == "_alpha(x)"
    finally:
        nvim.close()


def test_the_runtime_finds_every_piece_of_the_plugin_and_0_11_uses_the_ghost_path(workspace: Path) -> None:
    """What a plugin manager gives: the directory on 'runtimepath', nothing else called."""
    nvim = Nvim(None, workspace)
    try:
        assert nvim.lua("return vim.lsp.config['spd_lsp'].cmd") == ["spd-lsp", "--stdio"]
        assert [nvim.lua(f"return vim.fn.exists(':{c}')") for c in ("SpdIndex", "SpdStatus", "SpdToggle")] == [2, 2, 2]
        assert nvim.lua("return type(require('spd.health').check)") == "function"
        assert nvim.lua("return vim.version().minor") == 11
        assert nvim.lua("return require('spd.native').available()") is False
        nvim.lua("require('spd').setup(...)", {"cmd": FAKE_CMD, "debounce_ms": 20})
        nvim.open(workspace / "walk.py")
        nvim.input("ix = foo")
        assert nvim.wait_ghost()["text"] == "_alpha(x)", "0.11 draws with spd.ghost"
    finally:
        nvim.close()


NATIVE_STUB = """
-- A STUB of Neovim 0.12's vim.lsp.inline_completion (no 0.12 binary here): it records how
-- the plugin calls it and rejects calls outside the signatures the plugin was written for.
_G.calls = {}
local function check(ok, what) if not ok then error('spd called the 0.12 API wrongly: ' .. what) end end
vim.lsp.inline_completion = {
  enable = function(on, filter)
    check(type(on) == 'boolean' and type(filter) == 'table' and type(filter.bufnr) == 'number', 'enable')
    table.insert(calls, { 'enable', on, filter.bufnr })
  end,
  select = function(opts)
    check(type(opts) == 'table' and type(opts.count) == 'number', 'select')
    table.insert(calls, { 'select', opts.count })
  end,
  get = function(opts)
    check(opts == nil or (type(opts) == 'table' and (opts.on_accept == nil or type(opts.on_accept) == 'function')), 'get')
    table.insert(calls, { 'get' })
    if opts and opts.on_accept then
      opts.on_accept({ insert_text = 'x = foo_alpha(x)', range = { start = { row = 0, col = 0 } } })
    end
    return true
  end,
}
"""


def test_neovim_0_12_path_against_a_stub_of_the_builtin_inline_completion(workspace: Path) -> None:
    """Pins the calls the 0.12 path makes; whether real 0.12 accepts them is untested (no 0.12 here)."""
    nvim = Nvim(None, workspace)
    try:
        nvim.lua(NATIVE_STUB)
        nvim.lua("require('spd').setup(...)", {"cmd": FAKE_CMD})
        nvim.open(workspace / "walk.py")
        buf = nvim.api.current.buffer.number
        nvim.wait_for(lambda: nvim.lua("return calls")[-1:] == [["enable", True, buf]], "enable on attach")
        nvim.lua("_G.calls = {}")
        nvim.input("ix = foo<M-]><M-[><Tab><M-Right>")
        nvim.wait_for(lambda: nvim.line() == "x = foo_alpha", "accept-word through on_accept")
        assert nvim.lua("return calls") == [["select", 1], ["select", -1], ["get"], ["get"]]
        nvim.input("<Esc>")
        nvim.api.command("SpdToggle")
        assert nvim.lua("return calls")[-1] == ["enable", False, buf]
    finally:
        nvim.close()


def test_a_missing_server_gives_one_notification_naming_what_was_searched(workspace: Path) -> None:
    nvim = Nvim({"debounce_ms": 20}, workspace)  # no cmd: .venv, venv, then $PATH
    try:
        nvim.api.command("edit a.py")
        nvim.api.command("edit b.py")
        nvim.lua("require('spd').setup({})")  # a second setup must not repeat it
        text = nvim.messages()
        assert text.count("spd: the spd-lsp server was not found") == 1, text
        assert str(workspace / ".venv" / "bin" / "spd-lsp") in text and "spd-lsp on $PATH" in text
        assert not nvim.lua("return #vim.lsp.get_clients()")
        nvim.api.command("checkhealth spd")
        assert "server executable not found" in "\n".join(nvim.lines())
    finally:
        nvim.close()


def test_checkhealth_reports_server_version_model_device_and_stores(nvim: Nvim) -> None:
    nvim.api.command("checkhealth spd")
    report = nvim.wait_for(lambda: "model:" in (text := "\n".join(nvim.lines())) and text, "the health report")
    for expected in (f"server: {sys.executable}", "version: fake-spd-lsp 0.0.1", "model: fake-model on cpu",
                     "n-gram store for /tmp/fake: 0 files, 0 tokens"):
        assert expected in report, report


def test_a_crashed_server_restarts_and_every_buffer_reattaches(workspace: Path) -> None:
    nvim = start(workspace)
    try:
        nvim.open(workspace / "other.py")
        first = status(nvim)["pid"]
        os.kill(first, signal.SIGKILL)
        nvim.wait_for(lambda: "restarting in 0.5 s" in nvim.messages(), "the restart notice")
        for name in ("walk.py", "other.py"):
            nvim.api.command(f"buffer {name}")
            nvim.wait_for(nvim.attached, f"{name} to reattach")
        assert status(nvim)["pid"] != first
        nvim.input("ix = bar")  # didChange reaches the new server: the draft continues "bar"
        nvim.wait_ghost("_alpha(x)")
        assert status(nvim)["requests"] >= 1
    finally:
        nvim.close()


def test_restart_back_off_doubles_and_is_bounded(workspace: Path) -> None:
    nvim = Nvim(None, workspace)  # a pure function: no server needed
    try:
        delays = nvim.lua("local c = require('spd.client'); return vim.tbl_map(c.restart_delay_ms, { 1, 2, 3, 8, 20 })")
    finally:
        nvim.close()
    assert delays == [500, 1000, 2000, 30000, 30000]


def test_an_unnamed_buffer_gets_a_client(nvim: Nvim) -> None:
    nvim.api.command("enew")
    nvim.wait_for(nvim.attached, ":enew buffer to attach")
    nvim.input("ix = foo")
    assert nvim.wait_ghost()["text"] == "_alpha(x)"


def test_a_found_server_logs_to_its_own_file_not_to_lsp_log(workspace: Path, tmp_path: Path) -> None:
    """Neovim records every stderr line of a server in lsp.log as an [ERROR]: the command the
    plugin builds for a found spd-lsp sends the server's log to stdpath('log')/spd-lsp.log."""
    project = tmp_path / "project"
    exe = project / ".venv" / "bin" / "spd-lsp"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    nvim = Nvim(None, workspace)
    try:
        cmd, searched = nvim.lua("return { require('spd.config').server_cmd({}, ...) }", str(project))
        log_dir = nvim.lua("return vim.fn.stdpath('log')")
        assert cmd == [str(exe), "--stdio", "--log-file", str(Path(log_dir) / "spd-lsp.log")]
        assert searched == [str(exe)]
    finally:
        nvim.close()
