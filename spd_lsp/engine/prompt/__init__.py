"""The prompt: format per model family (formats), where the context goes (layout), the ids
fed to the model with token healing (build), the suffix-echo cut (echo), and the
other files' snippets (snippets, retrieval). Import the modules: this package
imports nothing, so the server starts without torch."""
