"""The blend metric: does a shown draft contain a token the model itself ranks outside its top m?

Superposition grafts the top draft's continuation onto the others (`if args.path isexists():`);
such a token is one the exact model would not have picked at that position. The check runs
the model once over the shown drafts' own tokens (decoding/verify.py's judge).
"""

from __future__ import annotations

from typing import Callable, Sequence

from spd_lsp.engine.decoding.drafts import DraftRules
from spd_lsp.engine.decoding.healing import HealedPrompt
from spd_lsp.api import DecodeOptions, DecodeRequest, Draft
from spd_lsp.engine.decoding.verify import judge
from spd_lsp.engine.local import LocalEngine

BLEND_TOP = 5


def _shown_tokens(engine: LocalEngine, draft: Draft, shown: str, prompt: list[int], healed: str) -> tuple[int, ...]:
    """The draft's tokens up to the end of what the editor shows of it."""
    ids = draft.token_ids
    for n in range(1, len(ids) + 1):
        if len(engine.table.decode(ids[:n], prompt)) >= len(healed) + len(shown):
            return tuple(ids[:n])
    return tuple(ids)


def blended(
    engine: LocalEngine,
    prefix: str,
    fit: Callable[[str], str],
    options: DecodeOptions,
    drafts: Sequence[Draft],
    shown: Sequence[str],
    top: int = BLEND_TOP,
    known: dict[tuple[int, ...], bool] | None = None,
    *,
    healed: HealedPrompt | None = None,
) -> list[bool]:
    """One flag per shown draft (in rank order): a token outside the model's top `top` at its position.

    `fit` is what turned the raw drafts into the `shown` ones (postprocess.Fit); `known` holds the
    flags of rows already judged at this prefix (filled here), so methods sharing drafts judge them once.
    `healed`: the prompt the drafts continued, where it held more than the prefix (context_study).
    """
    known = {} if known is None else known
    healed = healed or engine.prompt(DecodeRequest(prefix, options)).healed
    by_text: dict[str, Draft] = {}
    for draft in drafts:
        by_text.setdefault(fit(draft.text), draft)
    prompt = healed.prompt_ids
    rows = [_shown_tokens(engine, by_text[text], text, prompt, healed.remainder) for text in shown]
    new = list(dict.fromkeys(row for row in rows if row not in known))
    if new:
        rules = DraftRules(table=engine.table, stop_ids=engine.stop_ids, stop_at_newline=options.stop_at_newline)
        logits, _ = engine.runner.prefill(prompt)
        try:
            verdicts = judge(engine.runner, logits, engine.runner.cache, new, healed.remainder, rules)
        finally:
            engine.runner.rewind(len(prompt))
        known.update((row, v.blended(top)) for row, v in zip(new, verdicts))
    return [known[row] for row in rows]
