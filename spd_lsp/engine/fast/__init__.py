"""The fast path: our own forward of Llama-family decoders on the GGUF's own blocks, with our kernels
(`engine/kernels`), run as one declared plan (`plan.py`).

`assemble.build` makes a `FastBackend` (`backend.py`) for a loaded model and `attach` hangs it on the model, where every
`ModelRunner` of that model finds it (`attached`); other families keep transformers' forward. The modules: `plan.py`
(what serves what, resolved once at load), `layouts/` (the weights behind one `Linear` interface), `model.py` (the
forward), `backend.py` (decode steps, padded steps and trees, the fused step), `compile.py` (their graphs, compiled in
the background), `cache.py` (the key/value buffers), `light.py` (a model directory without transformers' classes),
`q4.py`, `q8.py` and `store.py` (the GGUF's blocks and what is derived from them), `compile_cache.py`.
It may import `engine/decoding` (the backend protocol, attention helpers) and `engine/kernels`, never the other way.
"""

from spd_lsp.engine.decoding.backends import attach, attached  # noqa: F401  (re-exported)
from spd_lsp.engine.fast.assemble import build  # noqa: F401  (re-exported)
