"""The GGUF header reader (spd_lsp/engine/gguf/file.py) reads every field as gguf-py does, its arrays of strings
decoded only when asked for, and refuses a cut file with a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFReader

from spd_lsp.engine.gguf.file import GGUFError, GGUFFile, Strings
from spd_lsp.engine.model import bundled_gguf


def test_every_field_equals_gguf_py_s_and_the_string_arrays_read_as_lists() -> None:
    path = bundled_gguf()
    ours = GGUFFile(path).fields
    theirs = {key: field.contents() for key, field in GGUFReader(path).fields.items() if not key.startswith("GGUF.")}
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        assert ours[key] == value, key
    tokens, merges = ours["tokenizer.ggml.tokens"], ours["tokenizer.ggml.merges"]
    assert isinstance(tokens, Strings) and len(tokens) == 49_152 and len(merges) == 48_900
    assert tokens[0] == theirs["tokenizer.ggml.tokens"][0] and tokens[-1] == theirs["tokenizer.ggml.tokens"][-1]
    assert tokens[10:13] == theirs["tokenizer.ggml.tokens"][10:13] and list(tokens) == theirs["tokenizer.ggml.tokens"]
    with pytest.raises(IndexError):
        tokens[49_152]


def test_a_file_cut_inside_its_vocabulary_is_refused_with_its_name(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(bundled_gguf().read_bytes()[:400_000])  # the header's tokens run past 400 kB
    with pytest.raises(GGUFError, match="cut.gguf: not a readable GGUF file"):
        GGUFFile(cut)
