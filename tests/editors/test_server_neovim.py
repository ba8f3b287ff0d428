"""A real editor: headless Neovim 0.11 starts `spd-lsp --stdio` with plain `vim.lsp.start`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench.isolation import isolated_env as server_env
from tests.lsp.test_server_e2e import PROGRAM

NVIM = Path(sys.executable).parent / "nvim"
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not NVIM.exists(), reason=f"no nvim at {NVIM}")]

SCRIPT = r"""
local root, out = vim.env.SPD_ROOT, vim.env.SPD_OUT
vim.cmd.edit(root .. '/walk.py')
local id = vim.lsp.start({
  name = 'spd-lsp',
  cmd = { vim.env.SPD_PYTHON, '-m', 'spd_lsp.cli', '--stdio' },
  root_dir = root,
  init_options = { engine = 'in-process', k = 3, maxTokens = 10 },
})
local client = vim.lsp.get_client_by_id(id)
vim.wait(60000, function() return client.initialized end, 50)
local last = vim.api.nvim_buf_line_count(0)
local line = vim.api.nvim_buf_get_lines(0, last - 1, last, false)[1]
local params = {
  textDocument = { uri = vim.uri_from_bufnr(0) },
  position = { line = last - 1, character = #line },
  context = { triggerKind = 2 },
}
local response = client:request_sync('textDocument/inlineCompletion', params, 120000, 0)
local file = io.open(out, 'w')
file:write(vim.json.encode({ response = response, encoding = client.offset_encoding }))
file:close()
client:stop(true)
vim.cmd('qa!')
"""


def test_neovim_gets_k_drafts(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "walk.py").write_text(PROGRAM)
    script, out = tmp_path / "drive.lua", tmp_path / "out.json"
    script.write_text(SCRIPT)
    env = {
        **server_env(tmp_path),
        "SPD_ROOT": str(root),
        "SPD_OUT": str(out),
        "SPD_PYTHON": sys.executable,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    subprocess.run([str(NVIM), "--headless", "--clean", "-c", f"luafile {script}"], env=env, timeout=180, check=True)
    answer = json.loads(out.read_text())
    assert answer["encoding"] == "utf-8"  # Neovim offers utf-8 first; the server takes it
    assert "err" not in answer["response"]
    items = answer["response"]["result"]["items"]
    typed = PROGRAM.split("\n")[-1]
    assert len(items) == 3 and len({item["insertText"] for item in items}) == 3
    assert all(
        item["insertText"].startswith(typed) and item["range"]["end"]["character"] == len(typed) for item in items
    )
    # Neovim logs every line of a server's stderr as an error: loading the model must not draw progress bars there.
    log = tmp_path / "state" / "nvim" / "lsp.log"  # absent when nothing was logged
    errors = [line for line in (log.read_text() if log.exists() else "").splitlines() if "[ERROR]" in line]
    assert not [line for line in errors if "it/s" in line or "%|" in line], errors[:3]


def test_completion_items_insert_the_word_plus_the_draft_without_a_text_edit() -> None:
    """Neovim 0.11's omnifunc keeps only the first word of a textEdit.newText; insertText it takes whole."""
    from spd_lsp.fit.edits import LineEdit
    from spd_lsp.lsp.handlers import completion_items

    before = "    naïve = load_"
    edits = [
        LineEdit(0, len(before), before + "rows(path, mode='r')", "rows(path, mode='r')", rank=0),
        LineEdit(0, len(before), before + "rows(path, mode='r')\nnext", "rows(path, mode='r')\nnext", rank=1),  # same first line
        LineEdit(0, len(before), "load_x", "x", rank=2),  # rewrites the typed text: left to the inline path
        LineEdit(0, len(before), before + "all()", "all()", rank=3, offer=7),
    ]
    items = completion_items("file:///a.py", before, edits)
    assert [(i.insert_text, i.filter_text, i.label, i.text_edit) for i in items] == [
        ("load_rows(path, mode='r')", "load_rows(path, mode='r')", "load_rows(path, mode='r')", None),
        ("load_all()", "load_all()", "load_all()", None),
    ]
    assert [i.sort_text for i in items] == ["000", "003"]
    assert items[1].command.arguments == ["file:///a.py", 3, "all()", 7]
    assert completion_items("file:///a.py", "x = naïve", [LineEdit(0, 9, "x = naïve_ok", "_ok")])[0].insert_text == "naïve_ok"
