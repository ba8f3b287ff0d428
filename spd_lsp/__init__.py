"""spd-lsp: k Superposed Decoding completion drafts for the price of one pass."""

__version__ = "0.1.0"
