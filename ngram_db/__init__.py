"""ngram_db: an exact, live LMDB store of n-gram counts over model tokens.

A library of its own: tokens in, counts out. Never imports torch or pygls.
"""

from ngram_db.protocol import NgramSource, TokenizerId

__all__ = ["NgramSource", "TokenizerId"]
