"""Facts of a loaded tokenizer that need no model: its identity (what n-gram stores are valid for) and
plain-text encoding (what n-gram counts are made of). No torch: the front end's stores use them."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ngram_db import TokenizerId


def encode_texts(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Batch-encode plain text (no BOS/EOS): what n-gram counts are made of. Batches run in parallel."""
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def tokenizer_identity(tokenizer: Any) -> TokenizerId:
    """Name + a fingerprint of the whole vocabulary: n-gram stores are only valid for it."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    digest = hashlib.sha256("\n".join(f"{i}\t{t}" for t, i in vocab).encode()).hexdigest()[:24]
    name = Path(str(getattr(tokenizer, "name_or_path", "") or "tokenizer")).name
    return TokenizerId(name=name, fingerprint=digest)
