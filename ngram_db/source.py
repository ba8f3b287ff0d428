"""The n-gram side of decoding, as the engine sees it.

Kept in ngram_db (no torch, no pygls) so both the LMDB store and the in-memory
test source implement it without depending on the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class TokenizerId:
    """Counts are only meaningful for the tokenizer that produced them."""

    name: str
    fingerprint: str


@runtime_checkable
class NgramSource(Protocol):
    """Gives p_ngram(v | context) = sum_n lambda_n * count(ctx_n, v) / count(ctx_n, *).

    ctx_n is the last n-1 tokens of the context; orders whose context is unseen
    contribute 0. `weights` maps order n -> lambda_n (e.g. {2: .01, ..., 6: .12}).
    """

    def p_ngram(
        self,
        contexts: Sequence[Sequence[int]],
        candidates: Sequence[Sequence[int]],
        weights: dict[int, float],
    ) -> list[list[float]]:
        """One row per context, one value per candidate token of that row.

        All k drafts of one decode step are asked in one call (one read
        transaction for the LMDB store).
        """
        ...
