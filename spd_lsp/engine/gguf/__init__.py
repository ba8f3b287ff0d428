"""A GGUF file as the engine reads it: its header and tensors (`file.py`), a transformers config (`config.py`) and a
fast tokenizer (`tokenizer.py`) from its metadata. No torch here; the weights' layouts are the fast path's
(`engine/fast/formats.py`)."""
