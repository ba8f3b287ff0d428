"""`give_back`: the C allocator's free pages returned to the system where the engine settles."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import time
from pathlib import Path

import pytest

from spd_lsp.engine import memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, read from /proc")


def _resident() -> int:
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) * 1024


def test_freed_heap_pages_leave_the_resident_memory() -> None:
    """128 MB in 2 kB blocks (below the allocator's mmap threshold: its heap) freed stay resident until given back,
    as the load's transients did (a tokenizer's parse: 313 MB)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    assert memory.give_back()
    before = _resident()
    blocks = [libc.malloc(2048) for _ in range(65536)]
    for block in blocks:
        libc.memset(block, 1, 2048)  # touched: resident
    for block in blocks[:-1]:  # the last kept: what lies below the heap's top is not cut off by free itself
        libc.free(block)
    held = _resident()
    assert memory.give_back()
    after = _resident()
    libc.free(blocks[-1])
    assert held - before > 100e6  # freed, still resident
    assert held - after > 100e6  # given back


def test_requests_in_a_row_give_back_once_idle(monkeypatch) -> None:
    """Each request's end restarts the wait: pages are given back once, after the last, not after each."""
    calls = []
    monkeypatch.setattr(memory, "give_back", lambda **kwargs: calls.append(kwargs))
    for _ in range(3):
        memory.when_idle(0.2)
        time.sleep(0.02)
    assert calls == []
    time.sleep(0.6)
    assert calls == [{"collect": False}]
