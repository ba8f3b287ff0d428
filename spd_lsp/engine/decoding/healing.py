"""Token healing: back up the prompt's last token and make drafts re-produce its text.

Prefixes usually end inside what training data would have as one token (half a
word, indentation after a newline). Generating from such a boundary is out of
distribution; instead each draft must first reproduce the backed-up text, with
tokens that cover part of it, or all of it and go on.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass
from typing import Callable

import torch

from spd_lsp.engine.decoding.placement import CPU


@dataclass(frozen=True)
class HealedPrompt:
    prompt_ids: list[int]  # what the model is fed
    remainder: str  # text of the backed-up token(s) that every draft must start with


def special_ids(tokenizer) -> frozenset[int]:
    """Control tokens: the declared specials and added tokens flagged special.

    SmolLM2 declares only three; `<jupyter_start>`, `<issue_closed>` and the like are
    added tokens marked special, outside `all_special_ids`.
    """
    added = getattr(tokenizer, "added_tokens_decoder", {})
    return frozenset(tokenizer.all_special_ids) | {i for i, token in added.items() if token.special}


def token_texts(tokenizer, vocab_size: int, specials: frozenset[int]) -> list[str]:
    """Each id's text as it reads after an ordinary token ("a": keeps the leading spaces SentencePiece drops);
    "" for `specials`. Decoded once per start, so through the Rust tokenizer itself where the tokenizer is one that
    decodes as it does (transformers' wrapper costs 4x its call here: 0.11 s against 0.03 s for 49,152 ids)."""
    anchor = tokenizer.encode("a", add_special_tokens=False)[-1:]
    head = tokenizer.decode(anchor, clean_up_tokenization_spaces=False)
    backend = _plain_backend(tokenizer)
    if backend is not None:
        def decode(ids: list[int]) -> str:
            return backend.decode(ids, skip_special_tokens=False)
    else:
        def decode(ids: list[int]) -> str:
            return tokenizer.decode(ids, clean_up_tokenization_spaces=False)
    return ["" if i in specials else decode(anchor + [i])[len(head):] for i in range(vocab_size)]


def _plain_backend(tokenizer):
    """The `tokenizers.Tokenizer` under a transformers fast tokenizer whose `decode` (clean-up off, specials kept)
    is that tokenizer's own; None for any other (a Python tokenizer, a subclass decoding its own way)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not getattr(tokenizer, "is_fast", False):
        return None
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    return backend if isinstance(tokenizer, TokenizersBackend) and type(tokenizer)._decode is TokenizersBackend._decode \
        else None


class TokenTable:
    """Text of every vocabulary token, indexed for 'starts with' and 'is a prefix of' queries.

    Special tokens have no text: no draft shows them, and healing never matches them.
    """

    def __init__(self, tokenizer, vocab_size: int):
        self.tokenizer = tokenizer
        self.special_ids = frozenset(i for i in special_ids(tokenizer) if i < vocab_size)
        self.texts = token_texts(tokenizer, vocab_size, self.special_ids)
        # By text, then id (a stable sort of the ids): what "starts with" and "is exactly" bisect. Two flat
        # sequences, no object a token: a dict of lists and a tuple a token held 67 MB for Gemma-3's 262,144 tokens.
        ids = sorted((i for i, t in enumerate(self.texts) if t), key=self.texts.__getitem__)
        self._sorted_texts = [self.texts[i] for i in ids]
        self._sorted_ids = array("q", ids)
        self._on_device: dict[tuple[tuple[str, object], torch.device], torch.Tensor] = {}

    def decode(self, ids: list[int], anchor: list[int]) -> str:
        """Text of ids as it reads after `anchor` (keeps leading spaces SentencePiece drops)."""
        anchor = anchor[-1:]
        head = self.tokenizer.decode(anchor, clean_up_tokenization_spaces=False)
        full = self.tokenizer.decode(anchor + ids, clean_up_tokenization_spaces=False)
        return full[len(head):]

    def consistent_with(self, remainder: str, *, device: torch.device = CPU) -> torch.Tensor:
        """Ids (on `device`) of tokens that start with `remainder` or are a non-empty prefix of it.

        Memoised per device: every draft asks again each step, and " " or "\n" match
        thousands of tokens, which would otherwise cross to the GPU every step.
        """
        return self._memo(("consistent", remainder), device, lambda: self._find_consistent(remainder))

    def banned(self, allowed: frozenset[int], *, device: torch.device = CPU) -> torch.Tensor:
        """Ids (on `device`) of the special tokens outside `allowed` (the stop tokens)."""
        return self._memo(("banned", allowed), device, lambda: sorted(self.special_ids - allowed))

    def _memo(self, key: tuple[str, object], device: torch.device, find: Callable[[], list[int]]) -> torch.Tensor:
        """Id tensors, each built once per device (bounded: by the vocabulary's texts, and the stop sets)."""
        if (key, device) not in self._on_device:
            self._on_device[key, device] = torch.tensor(find(), dtype=torch.long, device=device)
        return self._on_device[key, device]

    def _find_consistent(self, remainder: str) -> list[int]:
        texts = self._sorted_texts
        lo = bisect.bisect_left(texts, remainder)
        hi = bisect.bisect_left(texts, remainder + "\U0010ffff")
        ids = list(self._sorted_ids[lo:hi])
        for end in range(1, len(remainder)):
            prefix = remainder[:end]
            ids.extend(self._sorted_ids[bisect.bisect_left(texts, prefix) : bisect.bisect_right(texts, prefix)])
        return ids


def advance(remainder: str, token_text: str) -> tuple[str, str]:
    """(remainder left, new text beyond it) after emitting a token consistent with remainder."""
    if len(token_text) < len(remainder):
        return remainder[len(token_text):], ""
    return "", token_text[len(remainder):]


def heal(prompt_ids: list[int], table: TokenTable, *, enabled: bool = True) -> HealedPrompt:
    """Back up the last token when it is ordinary text and something stays to condition on."""
    if not enabled or len(prompt_ids) < 2 or not table.texts[prompt_ids[-1]]:
        return HealedPrompt(list(prompt_ids), "")
    remainder = table.decode(prompt_ids[-1:], prompt_ids[:-1])
    if "\ufffd" in remainder:  # a partial UTF-8 byte token: no text to constrain on
        return HealedPrompt(list(prompt_ids), "")
    return HealedPrompt(list(prompt_ids[:-1]), remainder)
