"""The engine a front end's settings ask for, injected into the session by `spd-lsp` (serve.py).

Here, above both, is the one place that knows the engine in process and the shared one: the
session only calls the loader it is given, so it never imports torch."""

from __future__ import annotations

from spd_lsp.api import Loaded
from spd_lsp.settings import Settings


def load_engine(settings: Settings, *, compile: bool = True) -> Loaded:
    """The real model and engine, imported lazily so the server answers `initialize` at once;
    or, with the `engine` setting, a client of the shared engine process (spd_lsp/remote).
    `compile`: the fast path's decode step (False: eager, for a one-request process)."""
    if settings.engine != "in-process":
        from spd_lsp.engine.memory import give_back
        from spd_lsp.remote.connect import load_remote

        loaded = load_remote(settings)
        give_back()  # what parsing the engine's tokenizer freed (~26 MB of a front end's RSS)
        return loaded
    from spd_lsp.engine.loading import load_local

    return load_local(settings.model_spec(), compile=compile)
