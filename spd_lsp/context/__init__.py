"""What the prompt may hold besides the prefix: other files' snippets, chosen from open documents, recently
edited ranges and the workspace index (BM25), within a token budget.

Beside `spd_lsp.fit`, above the settings: it may import settings, api, the bottom modules (cursor,
languages, worker) and ngram_db; never the session, the LSP layer, the engine, torch or transformers.
"""
