"""Token healing: back up the prompt's last token and make drafts re-produce its text.

Prefixes usually end inside what training data would have as one token (half a
word, indentation after a newline). Generating from such a boundary is out of
distribution; instead each draft must first reproduce the backed-up text, with
tokens that cover part of it, or all of it and go on.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class HealedPrompt:
    prompt_ids: list[int]  # what the model is fed
    remainder: str  # text of the backed-up token(s) that every draft must start with


class TokenTable:
    """Text of every vocabulary token, indexed for 'starts with' and 'is a prefix of' queries."""

    def __init__(self, tokenizer, vocab_size: int):
        self.tokenizer = tokenizer
        special = set(tokenizer.all_special_ids)
        anchor = tokenizer.encode("a", add_special_tokens=False)[-1:]
        self.texts = ["" if i in special else self.decode([i], anchor) for i in range(vocab_size)]
        self._order = sorted((t, i) for i, t in enumerate(self.texts) if t)
        self._sorted_texts = [t for t, _ in self._order]
        self._exact: dict[str, list[int]] = {}
        self._consistent: dict[str, torch.Tensor] = {}
        for text, i in self._order:
            self._exact.setdefault(text, []).append(i)

    def decode(self, ids: list[int], anchor: list[int]) -> str:
        """Text of ids as it reads after `anchor` (keeps leading spaces SentencePiece drops)."""
        anchor = anchor[-1:]
        head = self.tokenizer.decode(anchor, clean_up_tokenization_spaces=False)
        full = self.tokenizer.decode(anchor + ids, clean_up_tokenization_spaces=False)
        return full[len(head):]

    def consistent_with(self, remainder: str) -> torch.Tensor:
        """Ids of tokens that start with `remainder` or are a non-empty prefix of it.

        Memoised: every draft asks again each step, and " " or "\n" match thousands of tokens.
        """
        if remainder not in self._consistent:
            self._consistent[remainder] = self._find_consistent(remainder)
        return self._consistent[remainder]

    def _find_consistent(self, remainder: str) -> torch.Tensor:
        lo = bisect.bisect_left(self._sorted_texts, remainder)
        hi = bisect.bisect_left(self._sorted_texts, remainder + "\U0010ffff")
        ids = [i for _, i in self._order[lo:hi]]
        for end in range(1, len(remainder)):
            ids.extend(self._exact.get(remainder[:end], ()))
        return torch.tensor(ids, dtype=torch.long)


def advance(remainder: str, token_text: str) -> tuple[str, str]:
    """(remainder left, new text beyond it) after emitting a token consistent with remainder."""
    if len(token_text) < len(remainder):
        return remainder[len(token_text):], ""
    return "", token_text[len(remainder):]


def heal(prompt_ids: list[int], table: TokenTable, enabled: bool = True) -> HealedPrompt:
    """Back up the last token when it is ordinary text and something stays to condition on."""
    if not enabled or len(prompt_ids) < 2 or not table.texts[prompt_ids[-1]]:
        return HealedPrompt(list(prompt_ids), "")
    remainder = table.decode(prompt_ids[-1:], prompt_ids[:-1])
    if "\ufffd" in remainder:  # a partial UTF-8 byte token: no text to constrain on
        return HealedPrompt(list(prompt_ids), "")
    return HealedPrompt(list(prompt_ids[:-1]), remainder)
