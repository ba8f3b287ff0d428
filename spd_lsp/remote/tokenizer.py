"""The engine's tokenizer as plain values, so a front end tokenizes exactly as its engine does
(and a team's front ends need no model files of their own).

The front end rebuilds it on the `tokenizers` library alone (`WireTokenizer`): the few calls
the session and the indexer make, without importing transformers (about 30 MB less per
front end).
"""

from __future__ import annotations

from typing import Any, Sequence


def to_wire(tokenizer: Any) -> dict[str, Any]:
    special = {name: str(value) for name, value in tokenizer.special_tokens_map.items() if isinstance(value, str)}
    return {
        "json": tokenizer.backend_tokenizer.to_str(),
        "special": special,
        "name_or_path": str(getattr(tokenizer, "name_or_path", "") or ""),
        "add_bos_token": bool(getattr(tokenizer, "add_bos_token", False)),
    }


class WireTokenizer:
    """A fast tokenizer's interface as the front end uses it: encode, __call__ (ids, offsets), the vocabulary."""

    def __init__(self, values: dict[str, Any]) -> None:
        from tokenizers import Tokenizer

        self.backend = Tokenizer.from_str(values["json"])
        self.name_or_path = values["name_or_path"]
        self.add_bos_token = values["add_bos_token"]
        self.special_tokens_map = dict(values["special"])
        for name, token in self.special_tokens_map.items():  # eos_token, eos_token_id, ...
            setattr(self, name, token)
            setattr(self, f"{name}_id", self.backend.token_to_id(token))

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(self, text: str | Sequence[str], *, add_special_tokens: bool = True,
                 return_offsets_mapping: bool = False) -> dict[str, Any]:
        single = isinstance(text, str)
        encodings = self.backend.encode_batch([text] if single else list(text), add_special_tokens=add_special_tokens)
        out: dict[str, Any] = {"input_ids": [e.ids for e in encodings]}
        if return_offsets_mapping:
            out["offset_mapping"] = [list(e.offsets) for e in encodings]
        return {key: value[0] for key, value in out.items()} if single else out

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def get_vocab(self) -> dict[str, int]:
        return self.backend.get_vocab(with_added_tokens=True)

    def __len__(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)


def from_wire(values: dict[str, Any]) -> WireTokenizer:
    return WireTokenizer(values)
