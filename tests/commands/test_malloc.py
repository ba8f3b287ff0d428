"""The engine's allocator settings (`commands/malloc.py`): few page faults on a prefill's activations."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from spd_lsp.engine.memory import glibc_function

pytestmark = pytest.mark.skipif(glibc_function("mallopt") is None, reason="glibc's allocator only")

# A process tuned with the given mmap and trim thresholds runs the allocations of a prefill's decoder layers (the bundled
# model on ~1,000 tokens: its normed input, q/k/v, attention output, the MLP's 6 MB, the next residual; each written,
# most freed within the layer) and prints the minor page faults of the last 60 layers (the first 30 settle the heap).
PREFILL = textwrap.dedent("""
    import resource, sys, torch
    from spd_lsp.commands import malloc
    malloc.tune(mmap_threshold=int(sys.argv[1]), trim_threshold=int(sys.argv[2]))
    MB = 1024 * 1024

    def layer(residual):
        normed = torch.empty(residual.numel()).fill_(1.0)
        qkv = torch.empty(3 * MB // 4).fill_(1.0)
        attended = torch.empty(MB // 4 + 1000).fill_(1.0)
        del qkv
        mlp = torch.empty(6 * MB // 4).fill_(1.0)
        out = torch.empty(residual.numel()).fill_(1.0)
        del mlp, normed, attended
        return out

    residual = torch.zeros(288_000)
    for _ in range(30):
        residual = layer(residual)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(60):
        residual = layer(residual)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")
BEFORE = (256 * 1024, 4 * 1024 * 1024)  # the engine's thresholds before: every block from 256 KB up mapped


def faults(mmap_threshold: int, trim_threshold: int) -> int:
    out = subprocess.run([sys.executable, "-c", PREFILL, str(mmap_threshold), str(trim_threshold)],
                         capture_output=True, text=True, check=True, timeout=120)
    return int(out.stdout.strip().splitlines()[-1])


def test_a_prefills_activations_are_not_faulted_in_again_at_every_layer():
    """Defect: with blocks from 256 KB up mapped, each of a prefill's activations was faulted in page by page at every
    allocation (the engine's 1,022-token prefill: 164,000 faults, 1,060-1,160 ms against 830-900 in a process with
    glibc's defaults). The engine's settings fault a fraction of that (4x fewer here)."""
    from spd_lsp.commands import malloc

    assert faults(malloc.MMAP_THRESHOLD, malloc.TRIM_THRESHOLD) * 3 < faults(*BEFORE)

