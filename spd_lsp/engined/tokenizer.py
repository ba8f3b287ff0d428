"""The engine's tokenizer as plain values, so a front end tokenizes exactly as its engine does
(and a team's front ends need no model files of their own)."""

from __future__ import annotations

from typing import Any


def to_wire(tokenizer: Any) -> dict[str, Any]:
    special = {name: str(value) for name, value in tokenizer.special_tokens_map.items() if isinstance(value, str)}
    return {
        "json": tokenizer.backend_tokenizer.to_str(),
        "special": special,
        "name_or_path": str(getattr(tokenizer, "name_or_path", "") or ""),
        "add_bos_token": bool(getattr(tokenizer, "add_bos_token", False)),
    }


def from_wire(values: dict[str, Any]) -> Any:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(values["json"]), **values["special"])
    tokenizer.name_or_path = values["name_or_path"]
    return tokenizer
