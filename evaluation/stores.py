"""N-gram stores for the evaluation: the workspace (a share of the indexed files) and a base."""

from __future__ import annotations

import sysconfig
from pathlib import Path
from typing import Any, Sequence

from ngram_db.indexer import IndexOptions, Indexer
from ngram_db.store import NgramStore
from spd_lsp.tokens import tokenizer_identity

# The base: the standard library without its tests and tooling, like `spd-lsp index --base`
# but smaller, so building it once costs about a minute rather than several.
BASE_EXCLUDES = ["site-packages/", "dist-packages/", "test/", "tests/", "idlelib/", "lib2to3/", "tkinter/",
                 "pydoc_data/", "ensurepip/", "turtledemo/", "encodings/"]


def _encoders(tokenizer: Any) -> tuple[Any, Any]:
    return (lambda text: tokenizer.encode(text, add_special_tokens=False),
            lambda texts: tokenizer(texts, add_special_tokens=False)["input_ids"])


def workspace_store(path: Path, tokenizer: Any, root: Path, files: Sequence[Path]) -> NgramStore:
    """A store holding exactly `files` (kept across runs: unchanged files are not re-read)."""
    store = NgramStore.open(path, tokenizer_identity(tokenizer))
    encode, encode_batch = _encoders(tokenizer)
    indexer = Indexer(store, encode, [root], IndexOptions(), encode_batch=encode_batch)
    wanted = {str(f.resolve()) for f in files}
    for stale in set(store.files()) - wanted:
        indexer.remove_path(Path(stale))
    for path in files:
        indexer.update_path(path)
    return store


def base_store(path: Path, tokenizer: Any) -> NgramStore:
    """The standard library's n-grams, built on first use."""
    if not path.exists():
        store = NgramStore.open(path, tokenizer_identity(tokenizer))
        encode, encode_batch = _encoders(tokenizer)
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        Indexer(store, encode, [stdlib], IndexOptions(exclude=BASE_EXCLUDES), encode_batch=encode_batch).index(True)
        store.close()
    return NgramStore.open(path, tokenizer_identity(tokenizer), readonly=True)
