"""Free memory handed back to the system where the engine settles (after the load, the plan applied, a compile).

glibc's allocator keeps the pages of freed blocks in its heaps: the load's transients (the Gemma-3 tokenizer's
33 MB `tokenizer.json` parsed took 421 MB of resident memory, 313 MB of it free heap kept; float copies of blocks
dropped once our kernels load, a compile's graphs) stayed resident for the process's life. `malloc_trim(0)` gives
them back (docs/performance.md#resident-memory). Elsewhere (another C library) it does nothing.

A request's transients (logits of a 262,144-token vocabulary, verification's trees) are given back once the engine
has been idle `IDLE_S` (`when_idle`): not after every request, whose next one would fault the pages in again.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading

IDLE_S = 2.0  # seconds without a request before `when_idle`'s give-back

_lock = threading.Lock()
_timer: list[threading.Timer] = []
_libc: list[object] = []  # the C library once looked up, [None] where there is none to load


def glibc_function(name: str) -> object | None:
    """glibc's function `name` (`malloc_trim`, `mallopt`), or None where this C library has none."""
    if not _libc:
        try:
            _libc.append(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"))
        except OSError:
            _libc.append(None)
    return getattr(_libc[0], name, None) if _libc[0] is not None else None


def give_back(*, collect: bool = True) -> bool:
    """Collect Python's garbage (`collect`), then hand the C allocator's free pages back to the system; whether it
    could."""
    trim = glibc_function("malloc_trim")
    if trim is None:
        return False
    if collect:
        gc.collect()
    trim(0)
    return True


def when_idle(delay: float = IDLE_S) -> None:
    """`give_back` once `delay` seconds pass without another call (each call, at a request's end, starts it again)."""
    with _lock:
        for timer in _timer:
            timer.cancel()
        _timer.clear()
        timer = threading.Timer(delay, give_back, kwargs={"collect": False})  # no pause of the GIL for a collection
        timer.daemon = True
        _timer.append(timer)
        timer.start()
