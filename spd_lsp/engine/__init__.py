"""The engine: the model and every way of decoding with it. `local.LocalEngine` answers a `DecodeRequest`
alone, `batcher.Batcher` steps many together (the shared engine's scheduler), `loading.load_local` loads a
`ModelSpec` into one; decoding/ holds the methods, prompt/ the prompt, fast/ the fast decode path, model.py
resolves and loads the weights.

Below remote and settings: it may import api, the bottom modules (languages) and ngram_db, plus torch
and transformers; never settings, the session, the LSP layer or remote.
"""
