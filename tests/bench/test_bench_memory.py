"""bench/bench_memory.py's attribution: mappings read from smaps, tensors counted once, by kind, the GGUF's own left out."""

from __future__ import annotations

import torch

from bench.bench_memory import Attribution, Mapping, classify, engine_groups, mappings
from spd_lsp.engine.local import LocalEngine
from tests.tiny_models import tiny_model

SMAPS = """\
00400000-00500000 r--p 00000000 fd:00 12 /models/m.gguf
Size:               1024 kB
Rss:                 512 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                 100 kB
7f0000200000-7f0000300000 r-xp 00000000 fd:00 13 /usr/lib/libtorch_cpu.so
Rss:                  40 kB
"""


def test_mappings_are_read_with_their_resident_bytes() -> None:
    assert mappings(SMAPS) == [Mapping(0x400000, 0x500000, "/models/m.gguf", 512 * 1024),
                               Mapping(0x7F0000000000, 0x7F0000100000, "", 100 * 1024),
                               Mapping(0x7F0000200000, 0x7F0000300000, "/usr/lib/libtorch_cpu.so", 40 * 1024)]


def test_each_storage_counts_once_in_the_first_group_naming_it() -> None:
    a, b = torch.zeros(1000), torch.zeros(10)
    sizes = classify({"first": [a, a[10:]], "second": [a, b], "empty": []}, inside=[])
    assert sizes == {"first": 4000, "second": 40, "empty": 0}
    inside = [Mapping(a.data_ptr(), a.data_ptr() + 4000, "/models/m.gguf", 4000)]
    assert classify({"first": [a]}, inside)["first"] == 0  # the GGUF's own pages: counted as mapped


def test_an_engine_s_tensors_by_kind() -> None:
    engine = LocalEngine(tiny_model("llama+fast"))
    engine.runner.prefill(list(range(3, 40)))
    groups = classify(engine_groups(engine), inside=[])
    assert groups["prompt caches (current and parked)"] == engine.runner.held_bytes() > 0
    assert groups["rotary tables"] > 0 and groups["projections' layouts (blocks, packed, head)"] > 0
    rows = Attribution(rss=10**9, gguf_mapped=0, other_files=0, anonymous=10**9, tensors=groups).rows(10**8)
    assert rows[2] == "| **resident (RSS)** | **1,000** |" and rows[-1] == "| target: GGUF + 600 MB | 700 |"
