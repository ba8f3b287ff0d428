"""The plugin installed as users install it, each in a clean home (XDG_CONFIG_HOME,
XDG_DATA_HOME, XDG_STATE_HOME, XDG_CACHE_HOME under tmp, their own init.lua, no --clean):
lazy.nvim with `dir =` (lazy.nvim vendored: tests/editors/vendor/lazy.nvim, no clone), and
a native package (`pack/*/start`). Then `:help spd` resolves, and a draft appears."""

from __future__ import annotations

import filecmp
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.isolation import isolated_env
from tests.code_samples import WALK_HEAD
from tests.editors.nvim_driver import FAKE_SERVER, NVIM, PLUGIN_DIR, REPO, Nvim

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(NVIM).exists(), reason=f"no nvim at {NVIM}"),
]

LAZY = Path(__file__).with_name("vendor") / "lazy.nvim"
SERVER = REPO / ".venv" / "bin" / "spd-lsp"
HELP_TAGS = ("spd", "spd-settings", ":SpdStatus", "spd-install", "spd-health")

# What a lazy.nvim user writes (https://lazy.folke.io/installation), with the clone
# replaced by the vendored copy: nothing is downloaded.
LAZY_INIT = """
local lazypath = %(lazy)s
if not (vim.uv or vim.loop).fs_stat(lazypath) then error('lazy.nvim is not at ' .. lazypath) end
vim.opt.rtp:prepend(lazypath)
vim.opt.swapfile = false
require('lazy').setup({
  spec = {
    { dir = %(plugin)s, name = 'spd', main = 'spd', opts = vim.json.decode(%(opts)s) },
  },
  install = { missing = false },
  checker = { enabled = false },
  change_detection = { enabled = false },
  rocks = { enabled = false },
})
"""

PACKAGE_INIT = """
vim.opt.swapfile = false
require('spd').setup(vim.json.decode(%(opts)s))
"""


def lua_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid Lua string literal for these paths


def clean_home(root: Path, init: str) -> dict[str, str]:
    """XDG_* under `root` (the model cache stays shared: bench.isolation), `init` as init.lua."""
    home = {name: str(root / name.lower()) for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")}
    env = isolated_env(root)
    home.update(XDG_CACHE_HOME=env["XDG_CACHE_HOME"], SPD_LSP_CACHE=env["SPD_LSP_CACHE"],
                SPD_LSP_MODEL_CACHE=env["SPD_LSP_MODEL_CACHE"])
    config = Path(home["XDG_CONFIG_HOME"]) / "nvim"
    config.mkdir(parents=True)
    (config / "init.lua").write_text(init)
    return home


def help_resolves(nvim: Nvim, tag: str) -> bool:
    """`:help TAG` opens spd.txt at the tag."""
    nvim.api.command(f"help {tag}")
    found = nvim.lua("return vim.fn.expand('%:t')") == "spd.txt" and tag in nvim.api.current.line
    nvim.api.command("helpclose")
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.mark.integration
@pytest.mark.timeout(240)
@pytest.mark.skipif(not SERVER.exists(), reason=f"spd-lsp is not installed at {SERVER}")
def test_lazy_nvim_installs_the_plugin_from_a_clone_and_the_real_server_drafts(tmp_path: Path, workspace: Path) -> None:
    opts = {"cmd": [str(SERVER), "--stdio"], "engine": "in-process", "k": 3, "max_tokens": 8, "ngrams": {"enabled": False}}
    home = clean_home(tmp_path / "home", LAZY_INIT % {
        "lazy": lua_string(str(LAZY)), "plugin": lua_string(str(PLUGIN_DIR)), "opts": lua_string(json.dumps(opts))})
    prefix = WALK_HEAD + "            if name.end"
    (workspace / "walk.py").write_text(prefix + "\n")
    nvim = Nvim(None, workspace, home=home)
    try:
        assert nvim.lua("return require('lazy.core.config').plugins.spd._.loaded ~= nil"), "lazy loaded it at startup"
        assert nvim.lua("return vim.g.loaded_spd") is True, "lazy sourced plugin/spd.lua"
        assert nvim.lua("return vim.fn.exists(':SpdStatus')") == 2
        assert not (Path(home["XDG_DATA_HOME"]) / "nvim" / "lazy").exists() or not any(
            (Path(home["XDG_DATA_HOME"]) / "nvim" / "lazy").iterdir()), "nothing installed or cloned"
        assert [tag for tag in HELP_TAGS if not help_resolves(nvim, tag)] == []

        nvim.open(workspace / "walk.py", timeout=30)
        nvim.api.command("normal! G$")
        nvim.input("a")
        ghost = nvim.wait_ghost(timeout=180)
        assert ghost["counter"] == "1/3" and ghost["text"].strip(), ghost
        before = nvim.line()
        nvim.input("<Tab>")
        nvim.wait_for(lambda: nvim.line() != before, "the draft to be inserted")
        assert nvim.line() == before + ghost["text"]
    finally:
        nvim.close()


@pytest.mark.timeout(60)
def test_a_native_package_link_installs_the_plugin_with_its_help(tmp_path: Path, workspace: Path) -> None:
    """`ln -s …/editor-integrations/neovim ~/.local/share/nvim/site/pack/spd/start/spd` (spd-install)."""
    opts = {"cmd": [sys.executable, str(FAKE_SERVER)], "debounce_ms": 20}
    home = clean_home(tmp_path / "home", PACKAGE_INIT % {"opts": lua_string(json.dumps(opts))})
    start = Path(home["XDG_DATA_HOME"]) / "nvim" / "site" / "pack" / "spd" / "start"
    start.mkdir(parents=True)
    (start / "spd").symlink_to(PLUGIN_DIR, target_is_directory=True)
    nvim = Nvim(None, workspace, home=home)
    try:
        assert [tag for tag in HELP_TAGS if not help_resolves(nvim, tag)] == []
        nvim.open(workspace / "walk.py")
        nvim.input("ix = foo")
        assert nvim.wait_ghost()["text"] == "_alpha(x)"
    finally:
        nvim.close()


def test_the_committed_help_tags_are_what_helptags_makes(tmp_path: Path) -> None:
    """doc/tags ships with the plugin (no install method has to run :helptags): it must match doc/spd.txt."""
    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN_DIR / "doc", doc)
    (doc / "tags").unlink()
    nvim = Nvim(None, tmp_path)
    try:
        nvim.api.command(f"helptags {doc}")
    finally:
        nvim.close()
    assert filecmp.cmp(doc / "tags", PLUGIN_DIR / "doc" / "tags", shallow=False), (doc / "tags").read_text()
