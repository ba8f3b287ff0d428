"""The decode step's background compile, shown in the editor as work-done progress until its first graph is ready.

The first start compiles for minutes on a busy 2-core machine (docs/performance-step.md); later starts find the
compile cache and take seconds. Until then steps run eager and `spd.status` says "compiling in the background";
this puts the same in the editor's progress (or the log, for clients without it), ended with the compile's seconds.
It reads the engine's own status dict (kept current by the compile, `spd_lsp/engine/fast/compile.py`).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from spd_lsp.api import Loaded
from spd_lsp.session.report import model_info

TITLE = "spd-lsp: compiling the decode step"
POLL_S = 0.5
LIMIT_S = 3 * 3600.0  # a compile that never ends is said to the log by the compile itself; stop watching


def compiling(info: dict[str, Any]) -> bool:
    """The model's step has no compiled graph yet and one is being (or will be) compiled in the background."""
    return not info.get("compiled") and info.get("compileState") == "background"


def watch_compile(client: Any, loaded: Loaded, *, current: Callable[[], bool], poll_s: float = POLL_S,
                  limit_s: float = LIMIT_S) -> threading.Thread | None:
    """A thread showing `loaded`'s compile as progress while `current()` (its model is still the session's);
    None where nothing compiles in the background."""
    if not compiling(model_info(loaded.info, loaded.engine)):
        return None
    thread = threading.Thread(target=_watch, args=(client, loaded, current, poll_s, limit_s), daemon=True,
                              name="spd-compile-progress")
    thread.start()
    return thread


def _watch(client: Any, loaded: Loaded, current: Callable[[], bool], poll_s: float, limit_s: float) -> None:
    progress = client.progress(TITLE)
    started, said = time.monotonic(), None
    while current() and time.monotonic() - started < limit_s:
        info = model_info(loaded.info, loaded.engine)
        if info.get("compiled"):
            seconds = info.get("compileSeconds")
            progress.end(f"compiled in {seconds} s: decode steps run it now" if seconds is not None
                         else "compiled: decode steps run it now")
            return
        reason = str(info.get("compileReason") or "")
        if info.get("compileState") == "otherwise":  # another path serves the steps (the fused step)
            progress.end(f"nothing to compile: {reason}" if reason else "nothing to compile")
            return
        if not compiling(info):
            progress.end(f"decode steps run eager: {reason}" if reason else "decode steps run eager")
            return
        if reason != said:
            progress.report(reason)
            said = reason
        time.sleep(poll_s)
    progress.end("stopped watching (another model, or no end in sight)")
