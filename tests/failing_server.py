"""`python -m tests.failing_server`: the real server over stdio, with an engine whose every decode raises."""

from __future__ import annotations

from typing import Any

from spd_lsp.lsp.handlers import build_server
from spd_lsp.api import Loaded


class CharTokenizer:
    def __call__(self, text: str, **_: Any) -> dict[str, list[tuple[int, int]]]:
        return {"offset_mapping": [(i, i + 1) for i in range(len(text))]}

    def encode(self, text: str, **_: Any) -> list[int]:
        return [ord(c) for c in text]


class FailingEngine:
    tokenizer = CharTokenizer()

    def complete(self, request: Any, cancelled: Any = None) -> Any:
        raise RuntimeError("decode exploded")

    def warm(self, request: Any, cancelled: Any = None) -> int:
        return 0

    def set_ngrams(self, ngrams: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def link(self) -> dict[str, Any]:
        return {"address": None, "connected": None, "failures": 0}


if __name__ == "__main__":
    build_server(lambda settings: Loaded(FailingEngine(), {"name": "failing"}, "cpu")).start_io()
