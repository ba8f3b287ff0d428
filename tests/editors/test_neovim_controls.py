"""The Neovim plugin's controls (issue 48) in a real headless nvim against the fake server: `filetypes` as a
map with '*', accept line, `<Plug>` maps for every action, `:SpdSnooze`, the server's pushed status in the
statusline, and the shown / partly accepted notifications the server counts."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.editors.nvim_driver import FAKE_SERVER, NVIM, Nvim
from tests.editors.test_neovim_fake_server import status

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(60),
    pytest.mark.skipif(not Path(NVIM).exists(), reason=f"no nvim at {NVIM}"),
]

FAKE_CMD = [sys.executable, str(FAKE_SERVER)]
BLOCK = "_block():\n    return 42"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def session(workspace: Path, *extra: str, **options: Any) -> Nvim:
    return Nvim({"cmd": [*FAKE_CMD, *extra], "debounce_ms": 20, **options}, workspace)


def seen(nvim: Nvim) -> dict[str, Any]:
    """The documents the fake server holds and the shown / partly accepted notifications it got."""
    return nvim.lua(
        """
        local client = vim.lsp.get_clients({ name = 'spd_lsp' })[1]
        return client:request_sync('workspace/executeCommand', { command = 'fake.seen', arguments = {} }, 5000).result
        """
    )


def statusline(nvim: Nvim) -> str:
    return nvim.lua("return require('spd').statusline()")


def stays(probe: Any, seconds: float = 0.6) -> bool:
    """`probe()` stays falsy for `seconds` (what must not happen does not)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if probe():
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("filetypes", [{"*": True, "markdown": False}, {"*": False, "python": True}, ["python"]])
def test_filetypes_as_a_map_with_a_star_default_or_a_list(workspace: Path, filetypes: Any) -> None:
    nvim = session(workspace, filetypes=filetypes)
    try:
        nvim.open(workspace / "walk.py")
        nvim.input("ix = foo")
        nvim.wait_ghost("_alpha(x)")
        nvim.input("<Esc>")
        nvim.api.command(f"edit {workspace / 'notes.md'}")
        assert nvim.api.eval("&filetype") == "markdown"
        assert stays(nvim.attached), "an excluded filetype gets no client"
        documents = seen(nvim)["documents"]
        assert any(d.endswith("walk.py") for d in documents) and not any(d.endswith("notes.md") for d in documents)
        nvim.input("ix = foo")
        assert stays(lambda: nvim.ghost().get("text")), "nor drafts"
    finally:
        nvim.close()


def test_accept_line_takes_a_line_of_a_multiline_draft_and_the_server_hears_of_it(workspace: Path) -> None:
    nvim = session(workspace, "--drafts", json.dumps([BLOCK, "_other"]))
    try:
        nvim.open(workspace / "walk.py")
        nvim.input("ix = foo")
        ghost = nvim.wait_ghost("_block():")
        assert ghost["lines"] == ["    return 42"]
        nvim.input("<M-C-Right>")
        nvim.wait_for(lambda: nvim.lines() == ["x = foo_block():", ""], "one line accepted")
        assert nvim.wait_ghost()["text"] == "    return 42"
        partly = nvim.wait_for(lambda: seen(nvim)["partlyAccepted"], "didPartiallyAcceptCompletion")
        assert partly[0]["acceptedLength"] == len("foo_block():\n")
        assert partly[0]["item"]["insertText"] == "foo" + BLOCK
        assert status(nvim)["accepted"] == 0, "a part is not an accept"
        nvim.input("<M-C-Right>")  # the last line: the whole draft is in, an accept
        nvim.wait_for(lambda: nvim.lines() == ["x = foo_block():", "    return 42"], "the rest accepted")
        nvim.wait_for(lambda: status(nvim)["accepted"] == 1, "spd.accept")
    finally:
        nvim.close()


def test_every_action_has_a_plug_map_to_bind_keys_of_ones_own(workspace: Path) -> None:
    nvim = session(workspace, keymaps={"accept": False, "next": False})
    try:
        names = ("accept", "accept-word", "accept-line", "next", "prev", "dismiss", "toggle", "snooze")
        for name in names:
            assert nvim.api.call("maparg", f"<Plug>(spd-{name})", "i") != "", name
        nvim.lua("vim.keymap.set('i', '<C-l>', '<Plug>(spd-accept)'); vim.keymap.set('i', '<C-j>', '<Plug>(spd-next)')")
        nvim.open(workspace / "walk.py")
        nvim.input("ix = foo")
        nvim.wait_ghost("_alpha(x)")
        nvim.input("<C-j>")
        nvim.wait_ghost("_beta(y, z)")
        nvim.input("<C-l>")
        nvim.wait_for(lambda: nvim.line() == "x = foo_beta(y, z)", "the draft accepted by the user's own key")
        nvim.input("<Tab>")  # not mapped by the plugin any more: Python's softtabstop=4 indentation
        nvim.wait_for(lambda: nvim.line() == "x = foo_beta(y, z)  ", "a plain <Tab>")
    finally:
        nvim.close()


def test_snooze_stops_drafts_for_a_while_and_gives_the_keys_back(workspace: Path) -> None:
    nvim = session(workspace)
    try:
        nvim.open(workspace / "walk.py")
        nvim.api.command("SpdSnooze 5")
        assert statusline(nvim) == "SPD: snoozed 5m"
        before = status(nvim)["requests"]
        nvim.input("ix = foo")
        assert stays(lambda: nvim.ghost().get("text")) and status(nvim)["requests"] == before, "no request while snoozed"
        nvim.input("<Tab>")
        nvim.wait_for(lambda: nvim.line() == "x = foo ", "<Tab> is a plain <Tab> while snoozed")
        nvim.input("<Esc>")
        nvim.api.command("SpdSnooze 0")  # ends it
        assert not statusline(nvim).startswith("SPD: snoozed")
        nvim.input("A= bar")
        nvim.wait_ghost("_alpha(x)")
        nvim.input("<Esc>")
        nvim.api.command("SpdSnooze 0.01")  # 0.6 s: it ends by itself
        assert statusline(nvim) == "SPD: snoozed 1m"
        nvim.wait_for(lambda: not statusline(nvim).startswith("SPD: snoozed"), "the snooze to end", timeout=5)
        nvim.api.command("SpdToggle")
        assert statusline(nvim) == "SPD: off"
        nvim.api.command("SpdStatus")
        assert nvim.wait_for(nvim.float_text, "the status window").startswith("Client:   off (:SpdToggle turns it on)")
    finally:
        nvim.close()


def test_the_pushed_status_and_the_drafts_drawn_reach_the_statusline_and_the_server(workspace: Path) -> None:
    nvim = session(workspace)
    try:
        nvim.lua("_G.spd_events = 0; vim.api.nvim_create_autocmd('User', { pattern = 'SpdStatus', "
                 "callback = function() _G.spd_events = _G.spd_events + 1 end })")
        nvim.open(workspace / "walk.py")
        nvim.wait_for(lambda: statusline(nvim) == "SPD: warming up (shared engine)", "the server's warming up")
        nvim.input("ix = foo")
        nvim.wait_ghost("_alpha(x)")
        nvim.wait_for(lambda: statusline(nvim) == "SPD: ready (shared engine)", "ready after the first answer")
        assert nvim.lua("return _G.spd_events") >= 2
        nvim.input("<M-]>")
        nvim.wait_ghost("_beta(y, z)")
        nvim.input("<M-[>")
        nvim.wait_ghost("_alpha(x)")
        shown = nvim.wait_for(lambda: len(s := seen(nvim)["shownItems"]) >= 3 and s, "three draws reported")
        assert [item["item"]["insertText"] for item in shown] == ["foo_alpha(x)", "foo_beta(y, z)", "foo_alpha(x)"]
        assert shown[0]["item"]["command"]["command"] == "spd.accept"  # the item as served: the server reads its rank
    finally:
        nvim.close()


def test_typing_through_a_draft_does_not_report_it_again(workspace: Path) -> None:
    nvim = session(workspace, auto_trigger=False)
    try:
        nvim.open(workspace / "walk.py")
        nvim.input("ix = foo<M-]>")
        nvim.wait_ghost("_alpha(x)")
        nvim.input("_a")
        nvim.wait_ghost("lpha(x)")
        nvim.wait_for(lambda: seen(nvim)["shownItems"], "the draw reported")
        assert stays(lambda: len(seen(nvim)["shownItems"]) > 1), "the same item, redrawn: once"
    finally:
        nvim.close()
