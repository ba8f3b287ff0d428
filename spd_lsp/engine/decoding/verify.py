"""Verification of superposed drafts: one exact forward over all of them on the prompt cache.

SPD feeds a superposition of the drafts' tokens, so a draft's later tokens are chosen
from a distribution that mostly follows the top draft: the other drafts get blends
(`if args.path isexists():`). Here every draft's real tokens run as one prefix tree on the
prompt cache (tree attention: shared prefixes run once), which gives every token's exact
log-probability under the model. With it:

- rank: a draft's score is the sum of its exact log-probabilities, mixed with the
  n-grams exactly as during decoding;
- cut or repair: at the first token outside the model's top m, or far below the best
  token there, the draft is cut; a repair first puts the model's own choice in its place
  and either verifies the rest again (Jacobi-style, bounded rounds) or continues the draft
  greedily with the real model (decoding/continuation.py);
- gate: drafts far below the best one (per token) are not returned.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace
from typing import Callable, Generator

import torch
from transformers import DynamicCache

from ngram_db import NgramSource
from spd_lsp.engine.decoding.continuation import RaggedRows, continue_greedily
from spd_lsp.engine.decoding.drafts import DraftRules, Hypothesis
from spd_lsp.engine.decoding.interpolate import interpolate
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.verdicts import token_verdicts
from spd_lsp.api import CancelCheck, DecodeOptions, Timings, never_cancelled


@dataclass(frozen=True)
class Verdict:
    """What the model says about each token of one draft, position by position."""

    tokens: tuple[int, ...]
    logp: tuple[float, ...]  # exact log p of the token (renormalised over healing-consistent tokens)
    best: tuple[float, ...]  # log p of the model's choice at that position
    choice: tuple[int, ...]  # the model's choice
    rank: tuple[int, ...]  # 0 = the token is the model's choice

    def first_implausible(self, top: int | None, log_ratio: float) -> int | None:
        for i, (logp, best, rank) in enumerate(zip(self.logp, self.best, self.rank)):
            if (top is not None and rank >= top) or logp < best + log_ratio:
                return i
        return None

    def cut(self, end: int | None) -> Verdict:
        """The verdict on the first `end` tokens (None: all)."""
        return Verdict(*(values[:end] for values in self._columns))

    def then(self, later: Verdict) -> Verdict:
        """This verdict followed by `later`'s (the positions after it)."""
        return Verdict(*(a + b for a, b in zip(self._columns, later._columns)))

    @property
    def _columns(self) -> tuple[tuple, ...]:
        return self.tokens, self.logp, self.best, self.choice, self.rank

    def closed(self) -> Verdict:
        """This verdict with its last token replaced by the model's choice there (`closes_drafts`): exact, rank 0."""
        return Verdict(self.tokens[:-1] + self.choice[-1:], self.logp[:-1] + self.best[-1:], self.best, self.choice,
                       self.rank[:-1] + (0,))

    def blended(self, top: int) -> bool:
        """A token the model ranks outside its top m: the blend metric's definition."""
        return any(rank >= top for rank in self.rank)


def _crop(cache: DynamicCache, length: int) -> None:
    excess = cache.get_seq_length() - length
    if excess > 0:
        cache.crop(-excess)  # negative: "remove this many", in every transformers version


def judge(
    runner: ModelRunner,
    first_logits: torch.Tensor,
    cache: DynamicCache,
    rows: list[tuple[int, ...]],
    remainder: str,
    rules: DraftRules,
) -> list[Verdict]:
    """One forward of every row (all non-empty) after the prompt in `cache` (batch 1), cropped back after: the rows
    packed as a prefix tree under a tree attention mask, so shared prefixes run once.
    first_logits [1, V] are the prompt's last logits: the distribution of every row's first token.
    """
    return verdicts_of(run_rows(runner, first_logits, cache, rows, keep=False), remainder, rules)


@dataclass
class Judged:
    """The rows as the verification forward left them (what continuing them needs, continuation.py)."""

    rows: list[tuple[int, ...]]
    logits: list[torch.Tensor]  # each row's logits at each of its positions [len(row), V]
    cache: DynamicCache | None  # kept: the prompt, then the rows' packed tree
    columns: list[list[int]]  # the columns after the prompt holding each row's tokens (all but its last): its tree path


def run_rows(runner: ModelRunner, first_logits: torch.Tensor, cache: DynamicCache, rows: list[tuple[int, ...]], *,
             keep: bool) -> Judged:
    """`judge`'s forward: the logits at every position of every row; with `keep`, a copy of the cache with the rows'
    key/values too (the prompt cache is cropped back either way)."""
    length = cache.get_seq_length()
    later, columns = _packed_logits(runner, cache, rows)
    kept = copy.deepcopy(cache) if keep else None
    _crop(cache, length)
    return Judged(rows, row_logits(first_logits, later, rows), kept, columns)


def row_logits(first_logits: torch.Tensor, later: list[torch.Tensor], rows: list[tuple[int, ...]]) -> list[torch.Tensor]:
    """Each row's logits at each of its positions [len(row), V]: the prompt's last [1, V], then its own later ones."""
    first = first_logits.reshape(1, -1)
    return [(torch.cat([first, x.to(first.device)]) if len(x) else first)[: len(row)].float()  # one-token rows: no tree
            for row, x in zip(rows, later)]


def verdicts_of(judged: Judged, remainder: str, rules: DraftRules) -> list[Verdict]:
    """What the model says about every token of the rows `run_rows` ran."""
    return row_verdicts(judged.logits, judged.rows, remainder, rules)


def row_verdicts(logits: list[torch.Tensor], rows: list[tuple[int, ...]], remainder: str,
                 rules: DraftRules) -> list[Verdict]:
    """The verdicts on `rows` from each row's logits at each of its positions (`row_logits`)."""
    return [_verdict(x, row, remainder, rules) for x, row in zip(logits, rows)]


def prefix_tree(rows: list[tuple[int, ...]]) -> tuple[list[int], list[int], list[list[int]]]:
    """Every row but its last token as a trie: node tokens, node parents (-1: root), each row's node path."""
    tokens: list[int] = []
    parents: list[int] = []
    paths: list[list[int]] = []
    index: dict[tuple[int, int], int] = {}
    for row in rows:
        path, parent = [], -1
        for token in row[:-1]:
            if (parent, token) not in index:
                index[parent, token] = len(tokens)
                tokens.append(token)
                parents.append(parent)
            parent = index[parent, token]
            path.append(parent)
        paths.append(path)
    return tokens, parents, paths


def _packed_logits(
    runner: ModelRunner, cache: DynamicCache, rows: list[tuple[int, ...]]
) -> tuple[list[torch.Tensor], list[list[int]]]:
    """Per row [len - 1, V] and its node path: one batch-1 forward of the prefix tree appended to `cache`;
    a node sees the prompt and its ancestors."""
    return packed_logits(runner, cache, [rows], [cache.get_seq_length()])[0]


@torch.inference_mode()  # as every other forward: a grad-mode forward left the shared cache needing grad
def packed_logits(
    runner: ModelRunner, cache: DynamicCache, requests: list[list[tuple[int, ...]]], lengths: list[int]
) -> list[tuple[list[torch.Tensor], list[list[int]]]]:
    """Per request, per row [len - 1, V] and its node path: ONE forward of every request's prefix tree,
    a batch row each, appended to `cache`.

    `cache` holds request b's prompt in row b, left-padded to the cache's length, `lengths[b]`
    its real length; a tree node sees its prompt and its ancestors.
    """
    trees = [prefix_tree(rows) for rows in requests]
    width = max(len(tokens) for tokens, _, _ in trees)
    if not width:
        return [([torch.empty(0, 0)] * len(rows), paths) for rows, (_, _, paths) in zip(requests, trees)]
    length, dtype = cache.get_seq_length(), runner.model.dtype
    ids = torch.zeros(len(trees), width, dtype=torch.long)
    positions = torch.zeros(len(trees), width, dtype=torch.long)
    mask = torch.full((len(trees), 1, width, length + width), torch.finfo(dtype).min, dtype=dtype)
    for b, ((tokens, parents, _), prompt) in enumerate(zip(trees, lengths)):
        n = len(tokens)
        sees = torch.zeros(n, n, dtype=torch.bool)
        depth: list[int] = []
        for i, parent in enumerate(parents):  # a parent always comes before its children
            if parent >= 0:
                sees[i] = sees[parent]
            sees[i, i] = True
            depth.append(depth[parent] + 1 if parent >= 0 else 0)
        ids[b, :n] = torch.tensor(tokens, dtype=torch.long)
        positions[b] = prompt
        positions[b, :n] += torch.tensor(depth, dtype=torch.long)
        mask[b, 0, :, length - prompt : length] = 0  # padding queries see the prompt too: no empty softmax
        mask[b, 0, :n, length : length + n].masked_fill_(sees, 0)
    logits = runner.fast.tree(cache, ids, positions, mask) if runner.fast is not None else None  # compiled, padded
    if logits is None:  # eager; the fast path takes the mask as bool (True attends: its prompt kernel's form)
        logits = runner.net(
            input_ids=ids.to(runner.device),
            position_ids=positions.to(runner.device),
            attention_mask=(mask == 0 if runner.fast is not None else mask).to(runner.device),
            use_cache=True,
            **{runner._cache_kwarg: cache},
        ).logits
    return [([logits[b][path] for path in paths], paths) for b, (_, _, paths) in enumerate(trees)]


def _verdict(logits: torch.Tensor, row: tuple[int, ...], remainder: str, rules: DraftRules) -> Verdict:
    """Per-position figures from the row's logits [len(row), V], over the tokens a draft may hold (special tokens the
    drafts never get are no "model's choice"); while the healed text is not yet re-produced, only consistent tokens
    count."""
    tokens = torch.tensor(row, dtype=torch.long)
    token_logp, best, choice, rank = token_verdicts(logits, tokens, rules.table.banned(rules.stop_ids))
    state = Hypothesis(remainder=remainder)
    for i, token in enumerate(row):
        if state.remainder:
            logp = torch.log_softmax(rules.without_special(logits[i : i + 1].float()), dim=-1)[0].cpu()
            allowed = rules.table.consistent_with(state.remainder, device=logp.device)
            healed = torch.log_softmax(logp[allowed], dim=0)
            mine = healed[allowed == token]
            token_logp[i] = mine[0] if len(mine) else float("-inf")
            best[i], top = healed.max(dim=0)
            choice[i] = allowed[top]
            rank[i] = int((healed > token_logp[i]).sum())
        state = rules.extend(state, token, 0.0)
    return Verdict(row, tuple(token_logp.tolist()), tuple(best.tolist()), tuple(choice.tolist()), tuple(rank.tolist()))


def replay(rules: DraftRules, remainder: str, tokens: tuple[int, ...]) -> Hypothesis:
    """The draft these tokens make, ended at its first stop (a repaired token may be a newline)."""
    hyp = Hypothesis(remainder=remainder)
    for token in tokens:
        hyp = rules.extend(hyp, token, 0.0)
        if hyp.finished:
            break
    return hyp


def _exact_scores(
    verdicts: list[Verdict], context: list[int], ngrams: NgramSource | None, options: DecodeOptions
) -> list[float]:
    """Sum over each draft of the exact log p mixed with the n-grams, as during decoding."""
    logp = [torch.tensor(v.logp, dtype=torch.float32)[:, None] for v in verdicts]
    if not verdicts or ngrams is None or options.alpha == 0.0:
        return [float(x.sum()) for x in logp]
    span = max(options.ngram_weights) - 1
    tail = context[-span:]
    contexts = [(tail + list(v.tokens[:i]))[-span:] for v in verdicts for i in range(len(v.tokens))]
    candidates = [[t] for v in verdicts for t in v.tokens]
    p = torch.tensor(ngrams.p_ngram(contexts, candidates, options.ngram_weights), dtype=torch.float32)
    mixed = interpolate(torch.cat(logp), p, options.alpha, options.experimental.log_delta, drop_unsupported=False)
    return [float(part.sum()) for part in torch.split(mixed[:, 0], [len(v.tokens) for v in verdicts])]


def shown(hyps: list[Hypothesis], k: int, *, opened: Callable[[Hypothesis], bool] = lambda hyp: False
          ) -> list[Hypothesis]:
    """The k drafts the engine would return, best first: distinct non-blank texts by normalised score. An `opened`
    draft (left for verification to close) counts while its text is still blank (inside the healed text): its last
    token may begin its text; such drafts are told apart by their tokens."""
    rows: dict[str | tuple[int, ...], Hypothesis] = {}
    for hyp in sorted(hyps, key=lambda h: h.normalised, reverse=True):
        blank = not hyp.text.strip()
        if hyp.tokens and (not blank or opened(hyp)) and len(rows) < k:
            rows.setdefault(hyp.tokens if blank else hyp.text, hyp)
    return list(rows.values())


def verify(
    runner: ModelRunner,
    first_logits: torch.Tensor,
    prompt_ids: list[int],
    remainder: str,
    hyps: list[Hypothesis],
    rules: DraftRules,
    options: DecodeOptions,
    ngrams: NgramSource | None,
    timings: Timings,
    *,
    cancelled: CancelCheck | None = None,
) -> list[Hypothesis]:
    """Rank, cut or repair, and gate the drafts that would be shown; the runner's cache is back at the prompt.

    The single-request driver of `verification`: each round's rows run on the runner's prompt cache.
    """
    def judge_round(rounds: list[tuple[int, list[tuple[int, ...]]]]) -> list[list[Verdict]]:
        runner.rewind(len(prompt_ids))  # drop the superposed positions
        return [judge(runner, first_logits, runner.cache, rounds[0][1], remainder, rules)]

    def continued(rows: list[tuple[int, ...]], fixed: int) -> list[Verdict]:
        runner.rewind(len(prompt_ids))
        kept = run_rows(runner, first_logits, runner.cache, rows, keep=True)
        return _continued(runner, verdicts_of(kept, remainder, rules), kept, remainder, rules, options,
                          cancelled or never_cancelled, fixed=fixed)

    verifying = verification(prompt_ids, remainder, hyps, rules, options, ngrams, timings, continued=continued)
    return drive([verifying], judge_round)[0]


# A verification between rounds: yields the rows to judge, is sent their verdicts, returns the drafts.
Verification = Generator[list[tuple[int, ...]], list[Verdict], list[Hypothesis]]
# The repair that continues drafts (`verify_repair="continue"`): (rows, fixed) -> verdicts; it decodes on the
# prompt's cache, so it runs alone.
Continued = Callable[[list[tuple[int, ...]], int], list[Verdict]]
# Judges one round of several verifications: (index, rows) each; returns the verdicts of each, in order.
JudgeRound = Callable[[list[tuple[int, list[tuple[int, ...]]]]], list[list[Verdict]]]


def drive(verifyings: list[Verification], judge_round: JudgeRound) -> list[list[Hypothesis]]:
    """Run verifications to their ends in lockstep: each round, the rows of all that go on are judged together."""
    results: list[list[Hypothesis]] = [[] for _ in verifyings]
    sent: dict[int, list[Verdict] | None] = dict.fromkeys(range(len(verifyings)))
    while sent:
        rounds = []
        for i, verdicts in sent.items():
            try:
                rounds.append((i, verifyings[i].send(verdicts)))  # send(None) starts it
            except StopIteration as done:
                results[i] = done.value
        sent = dict(zip((i for i, _ in rounds), judge_round(rounds))) if rounds else {}
    return results


def closes_drafts(options: DecodeOptions, remainder: str) -> bool:
    """Whether verification chooses the last token of drafts that run to the budget (`last_token="tree"`), so the
    superposed pass stops one step short of it: where every shown draft is judged (not "keep" without a gate) and
    repaired by "jacobi" rounds (a "continue" repair decodes on itself), and the budget leaves the pass a step."""
    knobs = options.experimental
    return (knobs.last_token == "tree" and options.verify_rounds >= 1 and options.verify_repair == "jacobi"
            and not (knobs.verify_first == "keep" and knobs.verify_gate is None) and options.step_budget(remainder) > 1)


def open_draft(hyp: Hypothesis, options: DecodeOptions, remainder: str) -> bool:
    """A draft the pass left one token short of the budget for verification to close (`closes_drafts`)."""
    return not hyp.finished and len(hyp.tokens) == options.step_budget(remainder) - 1


def verification(prompt_ids: list[int], remainder: str, hyps: list[Hypothesis], rules: DraftRules,
                 options: DecodeOptions, ngrams: NgramSource | None, timings: Timings, *,
                 continued: Continued | None = None) -> Verification:
    """Rank, cut or repair, and gate the drafts that would be shown, one judging round per yield.

    `remainder` is the healed text every draft had to re-produce first. With
    `verify_first="keep"` SPD's top draft stays first and untouched (it is nearly always
    greedy's) and only ranks 2..k are cut, repaired, ranked and gated; the top row is run
    only where the gate needs its exact score. The caller judges the yielded rows on the
    prompt's cache (`judge`): alone (`verify`) or with other requests' rows in one forward;
    `continued` is where `verify_repair="continue"` goes (alone only).
    """
    started = time.perf_counter()
    closes = closes_drafts(options, remainder)
    opened = lambda hyp: closes and open_draft(hyp, options, remainder)  # noqa: E731
    drafts = shown(hyps, options.k, opened=opened)
    if not drafts:  # nothing the editor would show yet (e.g. still inside the healed text): nothing to judge
        return hyps
    knobs = options.experimental
    keep = knobs.verify_first == "keep" and bool(drafts)
    judged = drafts[1:] if keep and knobs.verify_gate is None else drafts
    if not judged:
        return drafts
    # A draft the pass left open gets a stand-in last token (its own last): the forward runs every row but its last
    # token, so the model's distribution at the stand-in's place comes with the rest and its choice replaces it.
    closing = [opened(h) for h in judged]
    rows = [tuple(h.tokens) + (h.tokens[-1],) if close else tuple(h.tokens) for h, close in zip(judged, closing)]
    verdicts = yield from _repaired_verdicts(rows, remainder, rules, options,
                                             fixed=1 if keep and len(judged) == len(drafts) else 0,
                                             continued=continued, closing=closing)
    fixed = [v for v in verdicts[:1] if keep and len(judged) == len(drafts)]  # the top's verdict, kept whole
    verdicts = fixed + [v.cut(_first_bad(v, options)) for v in verdicts[len(fixed):]]
    verdicts = [v for v in verdicts if v.tokens]
    totals = _exact_scores(verdicts, prompt_ids, ngrams, options)
    out = [replace(replay(rules, remainder, v.tokens), score=s) for v, s in zip(verdicts, totals)]
    nothing_left = not any(h.text.strip() for h in out)
    if (keep and not fixed) or (nothing_left and knobs.verify_empty == "top"):  # top not run, or nothing left
        out = [drafts[0]] + out
    elif nothing_left:  # the model finds every draft implausible from its start: show nothing
        out = []
    timings.verify_s += time.perf_counter() - started
    return ranked(out, options, lead=1 if knobs.verify_first != "rank" else 0)


def _repaired_verdicts(
    rows: list[tuple[int, ...]],
    remainder: str,
    rules: DraftRules,
    options: DecodeOptions,
    *,
    fixed: int,
    continued: Continued | None,
    closing: list[bool],
) -> Generator[list[tuple[int, ...]], list[Verdict], list[Verdict]]:
    """Verdicts on every row; rows from index `fixed` on are repaired where implausible: continued
    (`verify_repair="continue"`, by `continued`) or re-verified (bounded rounds). A `closing` row's last token is
    a stand-in: the model's choice there takes its place (`Verdict.closed`) before any repair."""
    if options.verify_repair == "continue":
        if continued is None:
            raise ValueError("verify_repair='continue' decodes on the prompt's cache: verify alone")
        return continued(rows, fixed)
    verdicts = [v.closed() if close else v for v, close in zip((yield rows), closing)]
    for _ in range(options.verify_rounds - 1):  # repair rounds: only the rows that need one run again
        bad = [(i, b) for i, v in enumerate(verdicts) if i >= fixed and (b := _first_bad(v, options)) is not None]
        if not bad:
            break
        repaired = [_repaired(verdicts[i], b, rules, remainder) for i, b in bad]
        for (i, _), verdict in zip(bad, (yield repaired)):
            verdicts[i] = verdict
    return list(verdicts)


def _continued(
    runner: ModelRunner,
    verdicts: list[Verdict],
    kept: Judged,
    remainder: str,
    rules: DraftRules,
    options: DecodeOptions,
    cancelled: CancelCheck,
    *,
    fixed: int,
) -> list[Verdict]:
    """Rows from `fixed` on with an implausible token: the model's choice in its place, then greedy
    tokens from the real model (all such rows as one batch on the verification's key/values), each
    new token's verdict exact.

    A repaired prefix that another draft continues with the model's own choices to its end (the
    usual blend: a top draft's head with a grafted tail) is that draft: it runs no step."""
    budget = options.step_budget(remainder)
    bad = {i: b for i, v in enumerate(verdicts) if i >= fixed and (b := _first_bad(v, options)) is not None}
    ends = [v for i, v in enumerate(verdicts)
            if i not in bad and (len(v.tokens) >= budget or replay(rules, remainder, v.tokens).finished)]
    out = list(verdicts)
    going: dict[tuple[int, ...], list[int]] = {}  # rows to continue, by their repaired head (run once each)
    for i, b in bad.items():
        head = verdicts[i].tokens[:b] + (verdicts[i].choice[b],)
        known = [v for v in ends if v.tokens[: b + 1] == head and not any(v.rank[b + 1:])]
        if known:
            out[i] = known[0]
        else:
            going.setdefault(head, []).append(i)
    if not going:
        return out
    firsts = [rows[0] for rows in going.values()]
    kept.cache.reorder_cache(torch.zeros(len(firsts), dtype=torch.long, device=runner.device))  # a row each, the tree's
    ragged = RaggedRows(runner, kept.cache, runner.cache.get_seq_length(), [kept.columns[i][: bad[i]] for i in firsts])
    starts = [replay(rules, remainder, verdicts[i].tokens[: bad[i]]) for i in firsts]
    logits = torch.stack([kept.logits[i][bad[i]] for i in firsts])  # the model's choice comes first
    continued = continue_greedily(runner, ragged, starts, logits, remainder, rules, options, cancelled)
    for rows, start, (hyp, seen) in zip(going.values(), starts, continued):
        logp = torch.log_softmax(rules.without_special(seen.float()), dim=-1).cpu()
        new = _verdict(logp, hyp.tokens[len(start.tokens):], start.remainder, rules)
        for i in rows:
            out[i] = verdicts[i].cut(bad[i]).then(new)
    return out



def ranked(hyps: list[Hypothesis], options: DecodeOptions, *, lead: int) -> list[Hypothesis]:
    """The first `lead` drafts stay in front; the rest by exact score (total or mean), gated; each keeps
    its own exact score and carries its place (`rank`), which the engine's final sort keeps."""
    head, rest = hyps[:lead], hyps[lead:]
    by_total = options.experimental.verify_score == "total"
    rest = sorted(rest, key=lambda h: h.score if by_total else h.normalised, reverse=True)
    out = gate(head + rest, options.experimental.verify_gate, against=head[0] if head else None)
    return [replace(hyp, rank=place) for place, hyp in enumerate(out)]


def _first_bad(verdict: Verdict, options: DecodeOptions) -> int | None:
    knobs = options.experimental
    return verdict.first_implausible(knobs.verify_top, knobs.verify_log_ratio)


def _repaired(verdict: Verdict, bad: int, rules: DraftRules, remainder: str) -> tuple[int, ...]:
    """The row with the model's choice in place of its first implausible token (the rest kept as a guess)."""
    tokens = verdict.tokens[:bad] + (verdict.choice[bad],) + verdict.tokens[bad + 1:]
    return replay(rules, remainder, tokens).tokens


def gate(hyps: list[Hypothesis], margin: float | None, *, against: Hypothesis | None = None) -> list[Hypothesis]:
    """Drafts within `margin` nats per token of `against` (None: the best one); `against` itself stays."""
    if margin is None or not hyps:
        return hyps
    best = against.normalised if against is not None else max(h.normalised for h in hyps)
    return [h for h in hyps if h is against or h.normalised >= best - margin]
