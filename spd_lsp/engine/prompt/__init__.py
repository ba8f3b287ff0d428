"""The prompt: format per model family (formats), where the context goes (layout), the ids
fed to the model with token healing (build), the suffix-echo cut (echo).

Inside the engine: it may import api, languages and the decoding package's healing table.
Import the modules: this package imports nothing, so the server starts without torch
(settings read `formats.PROMPT_FORMATS`)."""
