"""Drafts fitted to the text after the cursor: the edit each shown draft makes (edits.py), brackets and quotes
it must close or leave (nesting.py), and a tree-sitter parse that refuses what breaks the file (syntax.py).

Beside `spd_lsp.context`, above the settings: it may import the bottom modules (cursor, languages) and
ngram_db's secret filter; never the session, the LSP layer, the engine, torch or transformers.
"""
