"""Test-wide defaults: the fast path's decode step runs eager (compiling it takes minutes of CPU under load);
tests/engine/test_fast.py compiles it on purpose."""

import os

os.environ.setdefault("SPD_LSP_COMPILE", "0")
