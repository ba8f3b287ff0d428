"""The healing table, built once per start (`healing.token_texts`), is exactly the per-token decode it replaced."""

from __future__ import annotations

import tracemalloc

import pytest
from tokenizers import Tokenizer, decoders, models
from transformers import PreTrainedTokenizerFast

from spd_lsp.engine.decoding.healing import TokenTable, special_ids, token_texts
from tests.tiny_models import tiny_tokenizer


def reference_texts(tokenizer, vocab_size: int) -> list[str]:
    """The table as it was built before: every id through transformers' `decode` after the anchor, one by one."""
    specials = special_ids(tokenizer)
    anchor = tokenizer.encode("a", add_special_tokens=False)[-1:]
    head = tokenizer.decode(anchor, clean_up_tokenization_spaces=False)
    return ["" if i in specials else tokenizer.decode(anchor + [i], clean_up_tokenization_spaces=False)[len(head):]
            for i in range(vocab_size)]


def assert_table_is_the_reference(tokenizer, vocab_size: int) -> None:
    table = TokenTable(tokenizer, vocab_size)
    expected = reference_texts(tokenizer, vocab_size)
    differing = [i for i, (got, want) in enumerate(zip(table.texts, expected)) if got != want]
    assert len(table.texts) == vocab_size and not differing, differing[:10]
    by_text = sorted((t, i) for i, t in enumerate(expected) if t)  # by text, ties by id
    assert list(zip(table._sorted_texts, table._sorted_ids)) == by_text


def test_tiny_tokenizer_table_is_the_per_token_decode() -> None:
    tokenizer = tiny_tokenizer()
    assert_table_is_the_reference(tokenizer, len(tokenizer) + 7)  # ids past the vocabulary (a padded embedding): ""


@pytest.mark.integration
def test_bundled_tokenizer_table_is_the_per_token_decode() -> None:
    from spd_lsp.engine.model import load_tokenizer

    tokenizer = load_tokenizer(None)
    assert len(tokenizer) == 49152
    assert_table_is_the_reference(tokenizer, 49152)


class OwnDecode(PreTrainedTokenizerFast):
    """A fast tokenizer whose `decode` is its own: the table must go through it, not the Rust tokenizer."""

    def _decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=None, **kwargs) -> str:
        return super()._decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs).upper()


def test_a_tokenizer_with_its_own_decode_is_decoded_through_it() -> None:
    backend = Tokenizer(models.WordLevel({"a": 0, "b": 1, "<eos>": 2}, unk_token="<eos>"))
    backend.decoder = decoders.Fuse()
    tokenizer = OwnDecode(tokenizer_object=backend, eos_token="<eos>")
    assert token_texts(tokenizer, 3, frozenset({2})) == ["A", "B", ""]
    assert_table_is_the_reference(tokenizer, 3)


def test_consistent_tokens_are_those_that_start_with_the_remainder_or_are_a_prefix_of_it() -> None:
    tokenizer = tiny_tokenizer()
    table = TokenTable(tokenizer, len(tokenizer))
    for remainder in ("a", "de", " ", "\n", "def", "self.", "xyz", "e(", "return x"):
        got = table.consistent_with(remainder).tolist()
        want = sorted(i for i, t in enumerate(table.texts) if t and (t.startswith(remainder) or remainder.startswith(t)))
        assert sorted(got) == want and len(got) == len(set(got)), remainder


def test_the_table_holds_no_object_a_token_beyond_its_text() -> None:
    """Over a 262,144-token vocabulary (Gemma-3's) the table held 67 MB, ~255 bytes a token (a tuple, a list and a
    dict entry each beside its text); now two flat sequences beside the texts: under 100 bytes a token."""
    size = 262_144
    backend = Tokenizer(models.WordLevel({f"w{i:06d}": i for i in range(size)}, unk_token="w000000"))
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend)
    tracemalloc.start()
    try:
        table = TokenTable(tokenizer, size)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(table._sorted_ids) == size
    assert held / size < 100
