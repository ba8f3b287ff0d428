"""Draft hypotheses and the beam-style choice of the best k (shared by SPD and beam search)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from spd_lsp.engine.decoding.healing import TokenTable, advance
from spd_lsp.engine.decoding.placement import CPU, move_pair
from spd_lsp.api import Draft

INCOMPLETE_CHARACTER = "\ufffd"  # how a tokenizer decodes a partial UTF-8 sequence


@dataclass(frozen=True)
class Hypothesis:
    tokens: tuple[int, ...] = ()
    score: float = 0.0  # sum of log p_f
    remainder: str = ""  # healed text this draft has yet to reproduce
    text: str = ""  # text beyond the healed part, cut at a stop
    finished: bool = False
    rank: int | None = None  # its place in a verified ranking (verify.ranked); None: by normalised score

    @property
    def normalised(self) -> float:
        return self.score / max(1, len(self.tokens))

    @property
    def key(self) -> str:
        return f"{self.remainder}\0{self.text}"


@dataclass(frozen=True, kw_only=True)
class DraftRules:
    """How a token extends a draft: healing progress, stop tokens, end of line, no special tokens."""

    table: TokenTable
    stop_ids: frozenset[int]
    stop_at_newline: bool
    candidate_device: torch.device | None = CPU  # where proposed candidates go (placement.py); None: stay

    def extend(self, parent: Hypothesis, token: int, score: float) -> Hypothesis:
        remainder, new_text = advance(parent.remainder, self.table.texts[token])
        text = parent.text + new_text
        finished = token in self.stop_ids
        if self.stop_at_newline and "\n" in text:
            text, finished = text.split("\n", 1)[0], True
        return Hypothesis(parent.tokens + (token,), score, remainder, text, finished)

    def without_special(self, lm_logp: torch.Tensor) -> torch.Tensor:
        """lm_logp with special tokens other than the stop tokens at -inf: no draft may contain one."""
        banned = self.table.banned(self.stop_ids, device=lm_logp.device)
        return lm_logp.index_fill(-1, banned, float("-inf")) if len(banned) else lm_logp

    def propose(self, lm_logp: torch.Tensor, hyps: list[Hypothesis], pool: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Top `pool` candidates per draft [P, C], restricted to tokens consistent with its remainder.

        lm_logp is [1, V] (SPD: one distribution shared by all drafts) or [P, V]. The work
        runs on lm_logp's device; the result goes to `candidate_device` in one copy.
        """
        lm_logp = self.without_special(lm_logp)
        device = lm_logp.device
        ids = torch.zeros(len(hyps), pool, dtype=torch.long, device=device)
        logp = torch.full((len(hyps), pool), float("-inf"), device=device)
        shared = torch.topk(lm_logp[0], pool) if lm_logp.shape[0] == 1 else None
        for row, hyp in enumerate(hyps):
            dist = lm_logp[0 if shared is not None else row]
            if hyp.remainder:
                allowed = self.table.consistent_with(hyp.remainder, device=device)
                if len(allowed) == 0:
                    continue
                allowed_logp = torch.log_softmax(dist[allowed], dim=0)  # condition on consistency
                top = torch.topk(allowed_logp, min(pool, len(allowed)))
                n = len(top.indices)
                ids[row, :n], logp[row, :n] = allowed[top.indices], top.values
            else:
                top = shared if shared is not None else torch.topk(dist, pool)
                ids[row], logp[row] = top.indices, top.values
        return move_pair(ids, logp, self.candidate_device)


class FinishedPool:
    """Finished drafts kept aside: the best k distinct texts by length-normalised score."""

    def __init__(self, k: int):
        self.k = k
        self.by_text: dict[str, Hypothesis] = {}

    def add(self, hyp: Hypothesis) -> None:
        if not hyp.text.strip():
            return  # an empty draft has nothing to show
        best = self.by_text.get(hyp.text)
        if best is None or hyp.normalised > best.normalised:
            self.by_text[hyp.text] = hyp

    def saturated(self, active: list[Hypothesis]) -> bool:
        """k finished drafts that every live draft already trails: stop early."""
        if len(self.by_text) < self.k:
            return False
        kth = sorted((h.normalised for h in self.by_text.values()), reverse=True)[self.k - 1]
        return all(h.normalised < kth for h in active)


def extension_totals(parents: list[Hypothesis], cand_logp: torch.Tensor) -> torch.Tensor:
    """Score of every (parent, candidate) extension [P, C]: parent score + the candidate's log p."""
    scores = torch.tensor([h.score for h in parents], dtype=cand_logp.dtype, device=cand_logp.device)
    return scores[:, None] + cand_logp


def select(
    parents: list[Hypothesis],
    cand_ids: torch.Tensor,
    totals: torch.Tensor,
    k: int,
    rules: DraftRules,
    finished: FinishedPool,
) -> tuple[list[Hypothesis], list[int]]:
    """Best k live (parent, token) extensions with distinct texts; finished ones go to the pool.

    Reads the tensors into Python first: the ranking of a few dozen numbers is Python's job.
    """
    values, tokens = totals.flatten().tolist(), cand_ids.flatten().tolist()
    order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
    active: list[Hypothesis] = []
    parent_rows: list[int] = []
    seen: set[str] = set()
    for index in order:
        total = values[index]
        if total == float("-inf") or len(active) == k:
            break
        row = index // cand_ids.shape[1]
        child = rules.extend(parents[row], tokens[index], total)
        if child.finished:
            finished.add(child)
        elif child.key not in seen:
            seen.add(child.key)
            active.append(child)
            parent_rows.append(row)
    return active, parent_rows


def to_drafts(
    hyps: list[Hypothesis], k: int, table: TokenTable, anchor: list[int], healed: str, *, stop_at_newline: bool
) -> list[Draft]:
    """Final drafts: decoded text without the healed part, distinct, in verification's order where it ranked
    them, else best normalised score first; each with its own normalised score."""
    best: dict[str, Hypothesis] = {}
    for hyp in hyps:
        text = _final_text(hyp, table, anchor, healed, stop_at_newline=stop_at_newline)
        if text.strip() and (text not in best or hyp.normalised > best[text].normalised):
            best[text] = replace(hyp, text=text)
    ranked = sorted(best.values(), key=lambda h: (h.rank if h.rank is not None else len(hyps), -h.normalised))[:k]
    return [Draft(h.text, list(h.tokens), h.normalised, h.finished) for h in ranked]


def _final_text(hyp: Hypothesis, table: TokenTable, anchor: list[int], healed: str, *, stop_at_newline: bool) -> str:
    """Decode all tokens at once (multi-byte characters span tokens), then drop the healed text.

    A last character whose bytes the token limit cut short decodes as U+FFFD: the draft ends before it.
    """
    full = table.decode(list(hyp.tokens), anchor)
    text = full[len(healed):] if full.startswith(healed) else hyp.text
    text = text.rstrip(INCOMPLETE_CHARACTER)
    return text.split("\n", 1)[0] if stop_at_newline else text
