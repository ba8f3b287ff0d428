"""The fast tokenizer a GGUF file describes (its `tokenizer.ggml.*` metadata), made by transformers' own GGUF
converter, kept in the model's cache as `tokenizer.json` (a few MB, no weights) so later starts read it at once.

Made from the file: ~1.6 s on the bundled model (its reader 0.4 s, the converter 1.1 s). Read back by `read_kept`:
the bundled model's 0.07 s, Gemma-3-270M's (262,144 tokens, a 33 MB tokenizer.json) 0.96 s, where transformers'
`from_pretrained` takes 0.12 and 1.95 s (it parses tokenizer.json in Python besides the Rust read; medians of 4,
quiet machine).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from spd_lsp.engine.gguf.file import GGUFFile

log = logging.getLogger(__name__)

DIRECTORY = "tokenizer"  # under the model's cache directory
_unkept: dict[Path, str] = {}  # directories a tokenizer could not be kept in: why (said once a process)


def gguf_tokenizer(path: Path, cache: Path | None, *, file: GGUFFile | None = None) -> Any:
    """The tokenizer of the GGUF at `path` (`file`: its header, where the caller read it already), from
    `cache / DIRECTORY` where it was kept, else made (and kept there where it can be written: a cache that cannot be
    is said once, and the tokenizer made at each start)."""
    kept = cache / DIRECTORY if cache is not None else None
    tokenizer = None
    if kept is not None and (kept / "tokenizer.json").is_file():
        try:
            tokenizer = read_kept(kept)
        except Exception as exc:  # noqa: BLE001 - a damaged copy: made again from the file
            log.warning("ignoring the kept tokenizer in %s (%s): making it from the GGUF again", kept, exc)
    if tokenizer is None:
        tokenizer = made(path)
        if kept is not None:
            keep(tokenizer, kept)
    tokenizer.name_or_path = str(cache if cache is not None else path)  # its name in stores' messages: the model's
    # The GGUF's own word on a leading BOS (Gemma: true; SmolLM2: false): a kept copy read back says False whatever
    # the file says, and the engine builds prompts by this flag (`LocalEngine._with_bos`).
    fields = (file or GGUFFile(path)).fields
    tokenizer.add_bos_token = bool(fields.get("tokenizer.ggml.add_bos_token", False))
    return tokenizer


def read_kept(directory: Path) -> Any:
    """The tokenizer `keep` saved in `directory`, as transformers' `from_pretrained` reads it (the same specials,
    added tokens and chat template: tests/engine/test_gguf_tokenizer.py) with one read of tokenizer.json, Rust's;
    where its config holds what this does not pass on (added tokens of its own), `from_pretrained` itself."""
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    if not isinstance(config, dict) or config.pop("tokenizer_class", "TokenizersBackend") != "TokenizersBackend" \
            or "added_tokens_decoder" in config:
        return TokenizersBackend.from_pretrained(directory, local_files_only=True)
    config.pop("backend", None)
    template = directory / "chat_template.jinja"
    if template.is_file():
        config["chat_template"] = template.read_text(encoding="utf-8")
    return TokenizersBackend(tokenizer_file=str(directory / "tokenizer.json"), name_or_path=str(directory), **config)


def unkept(cache: Path) -> str | None:
    """Why the tokenizer of the model cached at `cache` is not kept there, if it could not be."""
    return _unkept.get(cache / DIRECTORY)


def made(path: Path) -> Any:
    """The tokenizer made from the GGUF's metadata (transformers' converter, as `from_pretrained(gguf_file=...)`)."""
    from transformers.integrations.gguf import convert_gguf_tokenizer, get_gguf_tokenizer
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    architecture, tokenizer_dict, tokenizer_config = get_gguf_tokenizer(str(path))
    backend, extra = convert_gguf_tokenizer(architecture, tokenizer_dict)
    return TokenizersBackend(tokenizer_object=backend, **{**tokenizer_config, **extra})


def keep(tokenizer: Any, directory: Path) -> None:
    """`tokenizer` saved into `directory` atomically; where it cannot be, said (made again at the next start)."""
    staging = None
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=directory.name + ".", dir=directory.parent))
        tokenizer.save_pretrained(staging)
        os.replace(staging, directory)
    except OSError as exc:
        note = (f"cannot write the model cache ({directory}: {exc.strerror or exc}): the tokenizer is made in memory "
                "from the GGUF at each start")
        if directory not in _unkept:
            log.warning("%s", note)
        _unkept[directory] = note
    finally:
        if staging is not None and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
