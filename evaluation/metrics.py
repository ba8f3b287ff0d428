"""Per-request scores of drafts against the real rest of the line, and their averages."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from evaluation.positions import matched_prefix


@dataclass
class RequestScore:
    exact_at_1: bool
    exact_at_k: bool
    chars_best: int  # longest correct prefix of the top draft
    chars_any: int  # ... of the best of the k drafts
    target_chars: int
    distinct: int  # distinct non-blank drafts after line cutting
    self_bleu: float | None  # None with fewer than two drafts
    decode_ms: float  # request time without the prompt's prefill (shared by every method)
    total_ms: float
    perplexity: list[float] = field(default_factory=list)  # evaluator perplexity per draft rank
    blended: list[bool] = field(default_factory=list)  # per draft rank: a token outside the model's top m
    verify_ms: float = 0.0
    drafts: list[str] = field(default_factory=list)


def score_request(drafts: Sequence[str], target: str, decode_ms: float, total_ms: float) -> RequestScore:
    want = target.strip()
    got = [d.strip() for d in drafts]
    chars = [matched_prefix(d, target) for d in drafts] or [0]
    return RequestScore(
        exact_at_1=bool(got) and got[0] == want,
        exact_at_k=want in got,
        chars_best=chars[0],
        chars_any=max(chars),
        target_chars=len(target),
        distinct=len({d for d in got if d}),
        self_bleu=self_bleu(list(drafts)),
        decode_ms=decode_ms,
        total_ms=total_ms,
    )


def _ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def _tokens(text: str) -> list[str]:
    """Code words and single punctuation marks: BLEU over what a reader compares."""
    out: list[str] = []
    word = ""
    for char in text:
        if char.isalnum() or char == "_":
            word += char
            continue
        if word:
            out.append(word)
            word = ""
        if not char.isspace():
            out.append(char)
    return out + ([word] if word else [])


def bleu(candidate: str, references: Sequence[str], max_n: int = 4) -> float:
    """Sentence BLEU with add-one smoothing for n > 1 (short code lines rarely share 4-grams)."""
    hyp = _tokens(candidate)
    refs = [_tokens(r) for r in references]
    if not hyp or not any(refs):
        return 0.0
    log_sum = 0.0
    for n in range(1, max_n + 1):
        counts = _ngrams(hyp, n)
        best: Counter = Counter()
        for ref in refs:
            best |= _ngrams(ref, n)
        overlap = sum(min(c, best[g]) for g, c in counts.items())
        total = sum(counts.values())
        smooth = 0 if n == 1 else 1
        if overlap + smooth == 0:
            return 0.0
        log_sum += math.log((overlap + smooth) / (total + smooth)) / max_n
    closest = min((len(r) for r in refs), key=lambda length: (abs(length - len(hyp)), length))
    brevity = 1.0 if len(hyp) > closest else math.exp(1 - closest / len(hyp))
    return brevity * math.exp(log_sum)


def self_bleu(drafts: list[str]) -> float | None:
    """Mean BLEU of each draft against the others: 1 = all the same, lower = more diverse."""
    if len(drafts) < 2:
        return None
    return statistics.mean(bleu(d, drafts[:i] + drafts[i + 1:]) for i, d in enumerate(drafts))


def summarise(scores: Sequence[RequestScore]) -> dict[str, float]:
    """The figures the report tables show, as fractions / means over requests."""
    bleus = [s.self_bleu for s in scores if s.self_bleu is not None]
    ranks = max((len(s.perplexity) for s in scores), default=0)
    out = {
        "requests": len(scores),
        "P@1": statistics.mean(s.exact_at_1 for s in scores),
        "P@k": statistics.mean(s.exact_at_k for s in scores),
        "chars_top": statistics.mean(s.chars_best for s in scores),
        "chars_best": statistics.mean(s.chars_any for s in scores),
        "line_share_best": statistics.mean(s.chars_any / s.target_chars for s in scores),
        "distinct": statistics.mean(s.distinct for s in scores),
        "self_bleu": statistics.mean(bleus) if bleus else float("nan"),
        "decode_ms": statistics.median(s.decode_ms for s in scores),
        "total_ms": statistics.median(s.total_ms for s in scores),
        "verify_ms": statistics.median(s.verify_ms for s in scores),
        "shown": statistics.mean(len(s.blended) for s in scores),
        "blend_any": statistics.mean(any(s.blended) for s in scores),
    }
    for rank in range(max((len(s.blended) for s in scores), default=0)):
        flags = [s.blended[rank] for s in scores if len(s.blended) > rank]
        out[f"blend_{rank + 1}"] = statistics.mean(flags)
    for rank in range(ranks):
        values = [s.perplexity[rank] for s in scores if len(s.perplexity) > rank]
        out[f"ppl_{rank + 1}"] = statistics.median(values) if values else float("nan")
    best = [min(s.perplexity) for s in scores if s.perplexity]
    out["ppl_best"] = statistics.median(best) if best else float("nan")
    return out
