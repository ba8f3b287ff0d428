"""The Neovim plugin against the real `spd-lsp --stdio` and the bundled model.

One nvim session for the module: the model loads once (~10 s on a 2-core CPU),
then each request takes about a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.editors.nvim_driver import NVIM, REPO, Nvim
from tests.code_samples import WALK_HEAD

SERVER = REPO / ".venv" / "bin" / "spd-lsp"
PREFIX = WALK_HEAD + "            if name.end"
K = 3

pytestmark = [
    pytest.mark.integration,
    pytest.mark.e2e,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not Path(NVIM).exists(), reason=f"no nvim at {NVIM}"),
    pytest.mark.skipif(not SERVER.exists(), reason=f"spd-lsp is not installed at {SERVER}"),
]


@pytest.fixture(scope="module")
def nvim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nvim]:
    workspace = tmp_path_factory.mktemp("workspace")
    (workspace / ".git").mkdir()
    (workspace / "walk.py").write_text(PREFIX + "\n")
    session = Nvim(
        {
            "cmd": [str(SERVER), "--stdio"],
            "engine": "in-process",
            "k": K,
            "max_tokens": 8,
            "ngrams": {"db": str(tmp_path_factory.mktemp("store"))},
        },
        workspace,
    )
    session.open(workspace / "walk.py", timeout=30)
    yield session
    session.close()


def test_k_distinct_drafts_cycle_and_accept_inserts_the_shown_one(nvim: Nvim) -> None:
    nvim.api.command("normal! G$")
    nvim.input("a")
    first = nvim.wait_ghost(timeout=120)
    assert first["counter"] == f"1/{K}"
    drafts = [first["text"]]
    for index in range(2, K + 1):
        nvim.input("<M-]>")
        drafts.append(nvim.wait_for(lambda: (g := nvim.ghost())["counter"] == f"{index}/{K}" and g["text"], f"draft {index}"))
    assert len(set(drafts)) == K, drafts
    nvim.input("<M-]>")
    assert nvim.wait_ghost(drafts[0])["counter"] == f"1/{K}"

    before = nvim.line()
    nvim.input("<Tab>")
    nvim.wait_for(lambda: nvim.line() != before, "the draft to be inserted")
    assert nvim.line() == before + drafts[0]


def test_dismiss_clears_the_next_drafts(nvim: Nvim) -> None:
    # After the accept the cursor ends `if ….endswith(".py"):`, where a verified one-line
    # continuation is empty; a new line inside the `if` gets drafts.
    nvim.input("<Esc>")
    nvim.api.command("normal! Go")
    nvim.api.current.line = "                paths.append(os.path.jo"
    nvim.input("A")
    nvim.wait_ghost(timeout=60)
    nvim.input("<C-]>")
    nvim.wait_for(lambda: not nvim.ghost().get("text"), "ghost text to clear")


def test_spd_status_reports_the_model_and_the_acceptance(nvim: Nvim) -> None:
    nvim.input("<Esc>")
    nvim.api.command("SpdStatus")
    text = nvim.wait_for(nvim.float_text, "the status window")
    print(text)  # docs/editors.md shows one (pytest -s)
    lines = text.splitlines()
    assert lines[0] == "Client:   on; filetype python: completed", text
    assert lines[1].startswith("Model:    ") and " on cpu, " in lines[1], text
    assert lines[2] == "Engine:   in-process (the model runs in this server)", text
    assert "Drafts:   accepted/shown by rank: #1 1/" in text, "the draft accepted with Tab: rank 1, drawn first"
    assert "; offered " in text and "State:    ready" in text, text
    assert nvim.lua("return require('spd').statusline()") == "SPD: ready"
    assert "Last:     " in text and " steps " in text and "Latency:  p50 " in text
    assert "{" not in text and "latencyMs" not in text, "readable lines, not the fields"


def test_omnifunc_fallback_inserts_exactly_the_servers_item(nvim: Nvim) -> None:
    """The completion-menu contract through the real server: the word before the cursor is replaced by the item."""
    nvim.input("<Esc>")
    nvim.api.command("SpdToggle")  # no ghost requests superseding the menu's (one document, one decode at a time)
    nvim.api.command("normal! Go")
    nvim.api.current.line = "                print(name"
    nvim.input("A<C-x><C-o>")
    items = nvim.wait_for(lambda: nvim.lua("return vim.fn.complete_info({ 'items' }).items"), "the items", timeout=120)
    assert all(item["word"].startswith("name") for item in items), items
    # With one match and Neovim's default 'completeopt' (no "menuone") the item is inserted
    # without a menu; <C-y> would then copy the character above the cursor (i_CTRL-Y).
    if nvim.lua("return vim.fn.complete_info({ 'pum_visible' }).pum_visible") == 1:
        nvim.input("<C-y>")
        nvim.wait_for(lambda: nvim.mode() == "i", "the completion to end")
    assert nvim.line() == "                print(" + items[0]["word"], items
    nvim.input("<Esc>")
    nvim.api.command("SpdToggle")


def test_multiline_auto_draws_a_block_body_after_its_header_and_accept_line_takes_it(nvim: Nvim) -> None:
    """`multiline = 'auto'` (setup() again: the running server gets it): at the end of a header whose body
    is still empty the draft spans lines, drawn as virtual lines; elsewhere drafts stay on their line."""
    nvim.input("<Esc>")
    nvim.lua("local opts = vim.deepcopy(require('spd').config); opts.multiline = 'auto'; opts.multiline_max_tokens = 32; "
             "require('spd').setup(opts)")
    nvim.api.command("normal! Go")
    nvim.api.current.line = "def total_of(values):"
    nvim.input("A")
    ghost = nvim.wait_for(lambda: (g := nvim.ghost()).get("lines") and g, "a draft over several lines", timeout=120)
    assert ghost["text"] == "" and ghost["lines"][0].startswith("    "), ghost  # the body, one level in
    row = nvim.api.current.window.cursor[0]
    nvim.input("<M-C-Right>")
    nvim.wait_for(lambda: len(nvim.lines()) > row, "the body's first line accepted")
    body = nvim.lines()[row]
    assert body.startswith("    ") and body.strip() and body == ghost["lines"][0], (body, ghost)
