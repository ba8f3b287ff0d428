"""Both editor clients speak the server's settings contract (spd_lsp.settings), key for key.

Checked against the server's own tables, so a setting added there without a
client twin (or a typo in a client) fails here rather than being silently ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.editors.nvim_driver import NVIM, REPO, Nvim
from spd_lsp.settings import (CONTEXT_KEYS, DECODINGS, DEVICES, DTYPES, KEYS, NGRAM_KEYS, OUTPUT_WEIGHTS, QUANTIZE, VERIFY,
                              parse_settings)
from spd_lsp.engine.prompt.formats import PROMPT_FORMATS

VSCODE_MANIFEST = REPO / "editor-integrations" / "vscode" / "package.json"

# One value per option, valid for the server, in the Neovim plugin's spelling.
NEOVIM_OPTIONS = {
    "k": 4,
    "max_tokens": 12,
    "decoding": "beam",
    "temperature": 0.5,
    "model": "/models/m.gguf",
    "device": "cpu",
    "dtype": "float32",
    "quantize": "int8",
    "fast_path": False,
    "output_weights": "float",
    "kernels": ["amx", "compile"],
    "max_prefix_tokens": 256,
    "multiline": "auto",
    "multiline_max_tokens": 40,
    "verify": "continue",
    "engine": "tcp://127.0.0.1:7777",
    "engine_token_file": "/run/team.token",
    "engine_certificate": "/etc/team.pem",
    "engine_standby": False,
    "ngrams": {
        "enabled": False,
        "orders": [2, 3],
        "weights": {"2": 0.5, "3": 0.5},
        "alpha": 0.2,
        "db": "/tmp/store",
        "index": False,
        "exclude": ["*.lock"],
        "secretFilter": False,
    },
    "prompt_format": "file_sep",
    "context": {"snippets": True, "header": True, "tokens": 128, "suffixTokens": 64, "sources": ["open"]},
    "exclude": ["*.secret", ".env*"],
}


@pytest.fixture(scope="module")
def nvim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nvim]:
    if not Path(NVIM).exists():
        pytest.skip(f"no nvim at {NVIM}")
    session = Nvim(None, tmp_path_factory.mktemp("cwd"))
    yield session
    session.close()


def test_neovim_options_become_exactly_the_server_settings(nvim: Nvim) -> None:
    settings = nvim.lua(
        "local config = require('spd.config'); return config.server_settings(config.resolve(...))", NEOVIM_OPTIONS
    )
    assert set(settings) - {"ngrams", "context"} == set(KEYS)
    assert set(settings["ngrams"]) == set(NGRAM_KEYS)
    assert set(settings["context"]) == set(CONTEXT_KEYS)
    parsed, warnings = parse_settings(settings)
    assert warnings == []
    assert (parsed.k, parsed.max_tokens, parsed.max_prefix_tokens, parsed.quantize) == (4, 12, 256, "int8")
    assert parsed.decode_options().verify_repair == "continue"
    assert parsed.ngrams.exclude == ("*.lock",)
    assert (parsed.multiline, parsed.multiline_max_tokens, parsed.exclude) == ("auto", 40, ("*.secret", ".env*"))


def test_neovim_defaults_are_valid_server_settings(nvim: Nvim) -> None:
    settings = nvim.lua("local config = require('spd.config'); return config.server_settings(config.resolve({}))")
    assert parse_settings(settings)[1] == []
    assert settings == {"k": 3, "maxTokens": 10, "decoding": "superposed"}  # multiline: the server's default


def test_vscode_contributes_one_setting_per_server_key_with_the_servers_choices() -> None:
    properties = json.loads(VSCODE_MANIFEST.read_text())["contributes"]["configuration"]["properties"]
    server = ({f"spd.{key}" for key in KEYS} | {f"spd.ngrams.{key}" for key in NGRAM_KEYS}
              | {f"spd.context.{key}" for key in CONTEXT_KEYS})
    assert set(properties) - {"spd.serverPath", "spd.enable"} == server  # the client's own two
    choices_of = {"decoding": DECODINGS, "device": DEVICES, "dtype": DTYPES, "quantize": QUANTIZE, "outputWeights": OUTPUT_WEIGHTS, "verify": VERIFY,
                  "promptFormat": PROMPT_FORMATS}
    for key, choices in choices_of.items():
        assert tuple(properties[f"spd.{key}"]["enum"]) == choices, key
    defaults = {key: properties[f"spd.{key}"]["default"] for key in KEYS}
    parsed, warnings = parse_settings({key: value for key, value in defaults.items() if value not in (None, "")})
    assert warnings == []
    assert (parsed.k, parsed.max_tokens, parsed.decoding) == (3, 10, "superposed")
