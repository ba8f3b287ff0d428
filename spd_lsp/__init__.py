"""spd-lsp: k Superposed Decoding completion drafts for the price of one pass.

The package's layers, top to bottom; a module imports only from layers below its own, and siblings
separated by `|` not from each other (pyproject.toml [tool.importlinter], checked by `lint-imports`
in `make test`): cli; commands; lsp; session; fit | context; remote; settings; engine; cursor |
worker | languages | tokens | auth | address; api (the plain values every layer shares). ngram_db is
a library of its own beside it. docs/architecture.md walks a keystroke through them.
"""

__version__ = "0.1.0"
