"""The token ids fed to the model: context pieces around the (healed) prefix.

Token healing backs up the prefix's last token and makes every draft re-produce
its text. That needs the prefix to be what the model continues:

- prefix-last layouts (no FIM, SmolLM2's repository tokens, Codestral's suffix-first
  `[SUFFIX]…[PREFIX]…`) end with the prefix: healing works as without context;
- prefix-suffix-middle layouts end with the middle token; the model's middle starts
  right where the prefix stops, so the backed-up token is taken off the prefix
  section and the middle must begin with its text. The model then writes the
  whole boundary token itself, as it would without a suffix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from spd_lsp.engine.decoding.healing import HealedPrompt, TokenTable, heal
from spd_lsp.engine.prompt.formats import PromptFormat
from spd_lsp.api import PromptContext
from spd_lsp.engine.prompt.layout import Piece, encode_pieces, layout


@dataclass(frozen=True)
class Prompt:
    healed: HealedPrompt
    format: str
    tokens: dict[str, int] = field(default_factory=dict)  # per part: header, suffix, prefix, snippet:<path>
    structured: bool = False  # the prompt holds the format's control tokens (so its end tokens mean something)

    def info(self) -> dict[str, Any]:
        """What `spd.status` shows of the prompt (plain values)."""
        snippets = [{"path": k.removeprefix("snippet:"), "tokens": v} for k, v in self.tokens.items() if k.startswith("snippet:")]
        parts = {k: v for k, v in self.tokens.items() if not k.startswith("snippet:")}
        return {"format": self.format, **{f"{k}Tokens": v for k, v in parts.items()}, "snippets": snippets}


def _counts(pieces: list[Piece], encode: Callable[[Piece], list[int]]) -> tuple[list[int], dict[str, int]]:
    ids: list[int] = []
    counts: dict[str, int] = {}
    for piece in pieces:
        piece_ids = encode(piece)
        ids += piece_ids
        counts[piece.part] = counts.get(piece.part, 0) + len(piece_ids)
    return ids, counts


def build_prompt(
    fmt: PromptFormat,
    context: PromptContext,
    prefix_ids: list[int],
    *,
    tokenizer: Any,
    table: TokenTable,
    with_bos: Callable[[list[int]], list[int]],
    healing: bool = True,
) -> Prompt:
    """The healed prompt for `prefix_ids` in `fmt` with `context`."""
    parts = layout(fmt, context)

    def encode(piece: Piece) -> list[int]:
        return encode_pieces([piece], lambda text: tokenizer.encode(text, add_special_tokens=False),
                             tokenizer.convert_tokens_to_ids)

    before, counts = _counts(parts.before, encode)
    after, after_counts = _counts(parts.after, encode)
    for part, count in after_counts.items():
        counts[part] = counts.get(part, 0) + count
    head = with_bos(before + prefix_ids)
    healed = heal(head, table, enabled=healing and bool(prefix_ids))
    counts["prefix"] = len(prefix_ids)
    counts["header"] = counts.get("header", 0) + len(head) - len(before) - len(prefix_ids)  # the BOS
    structured = any(p.special for p in (*parts.before, *parts.after))
    return Prompt(HealedPrompt(healed.prompt_ids + after, healed.remainder), fmt.name, counts, structured)


def stop_ids(fmt: PromptFormat, tokenizer: Any) -> frozenset[int]:
    """The format's end tokens the vocabulary has: a draft ends there (the middle or the file is done).

    Only for a structured prompt: after the bare prefix, `<file_sep>` is not an answer the model was
    asked for, and stays banned like every other control token.
    """
    have = set(tokenizer.get_vocab())
    return frozenset(tokenizer.convert_tokens_to_ids(t) for t in fmt.stops if t in have)
