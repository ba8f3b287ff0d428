"""ngram_db: an exact, live LMDB store of n-gram counts over model tokens.

A library of its own: tokens in, counts out. It never imports spd_lsp, evaluation, torch,
transformers or pygls (pyproject.toml [tool.importlinter]); its own modules import each other
without cycles. `NgramSource` (source.py) is what the engine asks of any n-gram layer.
"""

from ngram_db.source import NgramSource, TokenizerId

__all__ = ["NgramSource", "TokenizerId"]
