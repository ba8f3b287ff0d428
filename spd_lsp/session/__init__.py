"""The session: an editor's documents, settings and workspace stores as plain values, and the completion
flow over them (session.py: the prompt window, the typed request, type-through, precomputation, the
shown drafts as line edits); stores.py keeps the workspace n-gram stores, report.py `spd.status`.

Above fit and context: it may import fit, context, settings, api, the bottom modules, ngram_db and the
engine's prompt formats (plain values); never the LSP layer above, the model, remote, torch or
transformers (it only calls the engine it is given, an `api.EngineLike`).
"""
