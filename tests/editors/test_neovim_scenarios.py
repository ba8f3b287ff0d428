"""Buffer + cursor + keys -> the exact buffer after accepting, in real headless nvim 0.11.

The deterministic fake server (tests/editors/fake_spd_server.py, `--drafts`) answers
every request with the given continuations, so each scenario pins what the client
does with a draft: where it is shown, what accepting writes, what `u` takes back.
"""

from __future__ import annotations

import json
import sys
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


def fake_cmd(*drafts: str, delay_ms: int = 0, reindent: int | None = None) -> list[str]:
    cmd = [sys.executable, str(FAKE_SERVER), "--delay-ms", str(delay_ms)]
    if drafts:
        cmd += ["--drafts", json.dumps(list(drafts))]
    if reindent is not None:
        cmd += ["--reindent", str(reindent)]
    return cmd


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def start(workspace: Path, cmd: list[str], **options: Any) -> Nvim:
    nvim = Nvim({"cmd": cmd, "debounce_ms": 20, **options}, workspace)
    nvim.open(workspace / "scenario.py")
    return nvim


@pytest.fixture
def session(workspace: Path) -> Iterator[Any]:
    """start(...) for the test, closed afterwards."""
    opened: list[Nvim] = []

    def open_(cmd: list[str], **options: Any) -> Nvim:
        opened.append(start(workspace, cmd, **options))
        return opened[-1]

    yield open_
    for nvim in opened:
        nvim.close()


def prepare(nvim: Nvim, lines: list[str], cursor: tuple[int, int]) -> None:
    """The buffer's lines and the cursor (1-based row, byte column), in normal mode."""
    nvim.api.current.buffer[:] = lines
    nvim.api.current.window.cursor = cursor


def accept(nvim: Nvim, ghost: str) -> list[str]:
    """Waits for `ghost`, presses <Tab>, returns the buffer once it changed."""
    before = nvim.lines()
    nvim.wait_ghost(ghost)
    nvim.input("<Tab>")
    return nvim.wait_for(lambda: (lines := nvim.lines()) != before and lines, "the draft to be inserted")


SCENARIOS = {
    # name: (lines, cursor, keys, drafts, ghost, lines after accepting, cursor after)
    "inside auto-paired brackets, nested calls": (
        ["n = print(len())"], (1, 14), "iite", ["ms"], "ms", ["n = print(len(items))"], (1, 19)
    ),
    "before a closing quote": (
        ['greeting = "hello "'], (1, 18), "iwor", ["ld"], "ld", ['greeting = "hello world"'], (1, 23)
    ),
    "mid-line before code": (
        ["total = sum(values)"], (1, 8), "i", ["0.5 * "], "0.5 * ", ["total = 0.5 * sum(values)"], (1, 14)
    ),
    "at line end": (["result = comp"], (1, 0), "A", ["ute(x)"], "ute(x)", ["result = compute(x)"], (1, 19)),
    "multi-byte text before the cursor": (
        ['s = "日本語" + na'], (1, 0), "A", ["me + 'ü'"], "me + 'ü'",
        ["s = \"日本語\" + name + 'ü'"], (1, len("s = \"日本語\" + name + 'ü'".encode())),
    ),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_accepts_exactly_the_draft_where_the_cursor_is(session: Any, name: str) -> None:
    lines, cursor, keys, drafts, ghost, after, cursor_after = SCENARIOS[name]
    nvim = session(fake_cmd(*drafts))
    prepare(nvim, lines, cursor)
    nvim.input(keys)
    assert accept(nvim, ghost) == after
    assert tuple(nvim.api.current.window.cursor) == cursor_after
    assert nvim.mode() == "i"


def test_a_cursor_move_hides_the_ghost_at_once_and_the_new_draft_is_for_the_new_place(session: Any) -> None:
    nvim = session(fake_cmd(delay_ms=400))
    nvim.input("ix = foo")
    nvim.wait_ghost("_alpha(x)", timeout=15)
    nvim.input("<Left>")
    nvim.wait_for(lambda: tuple(nvim.api.current.window.cursor) == (1, 6), "the cursor to move")
    assert not nvim.ghost().get("text"), "the old draft must not be redrawn at the new cursor"
    # The fresh request (400 ms) is for the word before the new cursor, "fo".
    assert accept(nvim, "_alpha(x)") == ["x = fo_alpha(x)o"]


def test_undo_after_accepting_takes_back_only_the_draft(session: Any) -> None:
    nvim = session(fake_cmd())
    nvim.input("ix = foo")
    assert accept(nvim, "_alpha(x)") == ["x = foo_alpha(x)"]
    nvim.input("<Esc>u")
    nvim.wait_for(lambda: nvim.line() != "x = foo_alpha(x)", "undo")
    assert nvim.lines() == ["x = foo"]


def test_a_reindented_draft_gets_the_servers_indent_and_no_more(session: Any) -> None:
    """Seen: after <Tab> indents to 8 spaces, accepting " def f(self)" gave 9 spaces."""
    nvim = session(fake_cmd(" def find_highest_price(self):", reindent=4))
    prepare(nvim, ["class Shop:", "        "], (2, 0))
    nvim.input("A")
    assert accept(nvim, "def find_highest_price(self):") == ["class Shop:", "    def find_highest_price(self):"]


OMNIFUNC_CASES = {
    # name: (lines, drafts, which item (0-based), the line after accepting)
    "first item, after a word": (["warehouse = load_"], ["warehouse(sys.argv[1])"], 0, "warehouse = load_warehouse(sys.argv[1])"),
    "second item, with spaces": (["data = load_"], ["x", "rows(path, mode='r')"], 1, "data = load_rows(path, mode='r')"),
    "indented line, after a space": (["def f(a, b):", "    total = "], ["sum((a, b))"], 0, "    total = sum((a, b))"),
}


@pytest.mark.parametrize("name", OMNIFUNC_CASES)
def test_omnifunc_fallback_inserts_exactly_the_draft(workspace: Path, name: str) -> None:
    """`vim.lsp.enable('spd_lsp')` alone: Neovim sets omnifunc to vim.lsp.omnifunc; <C-x><C-o>, <C-n>..., <C-y>."""
    lines, drafts, index, expected = OMNIFUNC_CASES[name]
    nvim = Nvim(None, workspace)
    try:
        nvim.lua("vim.lsp.config('spd_lsp', { cmd = ... }); vim.lsp.enable('spd_lsp')", fake_cmd(*drafts))
        nvim.open(workspace / "main.py")
        assert nvim.lua("return vim.bo.omnifunc") == "v:lua.vim.lsp.omnifunc"
        prepare(nvim, lines, (len(lines), 0))
        nvim.input("A<C-x><C-o>")
        nvim.wait_for(lambda: nvim.lua("return #vim.fn.complete_info({ 'items' }).items") == len(drafts), "the items")
        nvim.input("<C-n>" * index + "<C-y>")
        nvim.wait_for(lambda: nvim.mode() == "i", "the completion to end")
        assert nvim.line() == expected
    finally:
        nvim.close()


def test_ghost_text_has_its_own_grey_highlight_kept_inside_bracket_matches(session: Any) -> None:
    nvim = session(fake_cmd())
    group = nvim.lua("return vim.api.nvim_get_hl(0, { name = 'SpdGhost' })")
    assert group.get("ctermfg") is not None and group.get("fg") is not None, group
    nvim.input("ix = foo(")
    nvim.wait_ghost("_alpha(x)")
    details = nvim.lua(
        """
        local ns = vim.api.nvim_get_namespaces()['spd.ghost']
        for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
          if mark[4].virt_text_pos == 'inline' then return mark[4] end
        end
        """
    )
    assert details["virt_text"][0][1] == "SpdGhost"
    assert details["hl_mode"] == "replace"


def test_toggled_off_keys_are_the_users_again(workspace: Path) -> None:
    nvim = Nvim(None, workspace)
    try:
        nvim.api.command("inoremap <M-[> PREV")
        nvim.lua("require('spd').setup(...)", {"cmd": fake_cmd(), "debounce_ms": 20})
        nvim.open(workspace / "walk.py")
        nvim.api.command("SpdToggle")
        nvim.input("iab<M-[>")
        nvim.wait_for(lambda: nvim.line() == "abPREV", "the user's own <M-[> mapping")
        nvim.input("<M-]><Esc>")  # unmapped: Neovim's own <Esc>] (the <Esc> ends the pending `]`)
        nvim.wait_for(lambda: nvim.mode() == "n", "<M-]> to leave insert mode as Neovim does")
        assert nvim.line() == "abPREV", "no literal ] typed"
        nvim.api.command("SpdToggle")
        nvim.input("<Esc>A_")
        nvim.wait_ghost("_alpha(x)")
        nvim.input("<M-]>")
        nvim.wait_ghost("_beta(y, z)")
    finally:
        nvim.close()
