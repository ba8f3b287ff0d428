"""glibc's allocator tuned for a long-lived process (`mallopt`, before the process starts its threads).

By default glibc gives each thread that allocates its own arena (up to 8 per core) and raises its mmap threshold as
large blocks are freed, so that later large blocks come from the heap instead, where they fragment it. Under a typing
storm (2 documents x 20 requests/s, half cancelled; `bench/bench_windows.py --storm 240`) the shared engine's RSS rose
878 -> 964 MB from the first minute to 195 s with the defaults, 800 -> 841 MB with 2 arenas, a fixed 256 KB mmap
threshold and a 4 MB trim threshold (`spd-lsp engine` sets them; the front end keeps the defaults: 2 arenas alone
changed nothing measurable there, 122 -> 123 MB). Elsewhere (not glibc) this does nothing.

The mmap threshold is fixed at 32 MB (the top of glibc's dynamic range), not lower: a mapped block is faulted in page
by page at every allocation, and a prefill's activations are 1-12 MB blocks. The trim threshold stays 4 MB: a larger
one made the storm's RSS grow (figures, AMD EPYC Zen 5: CHANGELOG; `tests/commands/test_malloc.py`).
"""

from __future__ import annotations

import logging

from spd_lsp.engine.memory import glibc_function

log = logging.getLogger(__name__)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's malloc.h
ARENAS = 2
MMAP_THRESHOLD = 32 * 1024 * 1024  # fixed (glibc's dynamic top on 64 bits): blocks from here up mapped
TRIM_THRESHOLD = 4 * 1024 * 1024  # free memory past this at the heap's top goes back to the system


def tune(*, arenas: int = ARENAS, mmap_threshold: int | None = None, trim_threshold: int | None = None) -> bool:
    """At most `arenas` malloc arenas; a fixed `mmap_threshold` and `trim_threshold` where given. False where
    this is not glibc (nothing changed)."""
    mallopt = glibc_function("mallopt")
    if mallopt is None:
        return False
    settings = [(M_ARENA_MAX, arenas), (M_MMAP_THRESHOLD, mmap_threshold), (M_TRIM_THRESHOLD, trim_threshold)]
    for parameter, value in settings:
        if value is not None and mallopt(parameter, value) != 1:
            log.debug("mallopt(%d, %d) refused", parameter, value)
    return True
