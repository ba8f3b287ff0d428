"""Store errors. Every message names the store and says what the user can do,
because the server shows them and then carries on without n-grams."""

from __future__ import annotations


class StoreError(RuntimeError):
    """Any failure to open, read or write an n-gram store."""


class StoreLockedError(StoreError):
    """Another writer held the store for longer than we were willing to wait."""


class StoreCorruptError(StoreError):
    """The files are not a store this version can read; rebuilding fixes it."""


class StoreReadOnlyError(StoreError):
    """A write was asked of a store opened (or only openable) read-only."""


class TokenizerMismatchError(StoreError):
    """The store counts another tokenizer's ids; its counts would be nonsense here."""


class StoreFullError(StoreError):
    """The device holding the store has no space left; what was committed stays."""
