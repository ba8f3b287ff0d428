"""Where the engine's resident memory goes, after it settled: the attribution behind the anchor table's RSS column.

Loads a GGUF as `bench_vs_llamacpp` does (ours only: no llama.cpp needed), runs the same kind of requests on
`--rounds` prefixes of real code (the prompt cached, greedy and SPD k=3 lines, a cold request each), waits for the
background work, then prints the process's resident memory split into:

- the GGUF's pages mapped in (file-backed: the blocks the kernels read), other files mapped (torch's libraries);
- tensors the engine holds in its own (anonymous) memory, by kind: the projections' layouts (float copies counted
  apart), the embedding, norms, rotary tables, the prompt caches (current and parked), everything else a Python
  object reaches (gc), each storage counted once;
- the rest of the anonymous memory: Python's objects, the tokenizer, the allocator's free pages not given back.

    PYTHONPATH=. nice -n 10 .venv/bin/python -m bench.bench_memory [--model PATH.gguf] [--rounds 3] [--threads 2]
        [--package jinja2] [--malloc engine|default]

Target (issue 45): RSS <= GGUF size + 600 MB. Not part of `make test`; tests/bench/test_bench_memory.py checks the
attribution on a tiny model.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

MB = 1e6


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    path: str  # "" for anonymous memory
    rss: int  # bytes resident


def mappings(smaps: str | None = None) -> list[Mapping]:
    """The process's memory mappings with their resident bytes (/proc/self/smaps)."""
    text = smaps if smaps is not None else Path("/proc/self/smaps").read_text()
    found: list[Mapping] = []
    head: tuple[int, int, str] | None = None
    for line in text.splitlines():
        first = line.split(maxsplit=1)[0] if line.strip() else ""
        if "-" in first and not first.endswith(":"):
            parts = line.split()
            start, end = (int(x, 16) for x in parts[0].split("-"))
            head = (start, end, parts[5] if len(parts) > 5 else "")
        elif first == "Rss:" and head is not None:
            found.append(Mapping(*head, int(line.split()[1]) * 1024))
    return found


@dataclass
class Attribution:
    """Bytes by line of the table; `anonymous` the process's anonymous resident bytes they are part of."""

    rss: int
    gguf_mapped: int
    other_files: int
    anonymous: int
    tensors: dict[str, int] = field(default_factory=dict)

    def rows(self, gguf_bytes: int) -> list[str]:
        held = sum(self.tensors.values())
        lines = ["| part | MB |", "| --- | ---: |",
                 f"| **resident (RSS)** | **{self.rss / MB:,.0f}** |",
                 f"| GGUF pages mapped in (file: {gguf_bytes / MB:,.0f} MB) | {self.gguf_mapped / MB:,.0f} |",
                 f"| other files mapped (torch's and Python's libraries) | {self.other_files / MB:,.0f} |",
                 f"| anonymous memory | {self.anonymous / MB:,.0f} |"]
        lines += [f"| - tensors: {name} | {size / MB:,.1f} |" for name, size in self.tensors.items()]
        lines.append(f"| - the rest: Python objects, tokenizer, allocator's free pages | {(self.anonymous - held) / MB:,.0f} |")
        lines.append(f"| target: GGUF + 600 MB | {(gguf_bytes + 600 * MB) / MB:,.0f} |")
        return lines


def _storage(t: Any) -> tuple[int, int] | None:
    """(address, bytes) of a tensor's storage; None for one without plain storage (meta, sparse, wrapped)."""
    try:
        storage = t.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except Exception:  # noqa: BLE001 - a subclass or a meta tensor: not memory of ours
        return None


def classify(groups: dict[str, Iterable[Any]], inside: list[Mapping]) -> dict[str, int]:
    """Bytes of each group's tensors' storages, each storage counted once (in the first group naming it), those inside
    the file mappings `inside` (the GGUF's own pages, counted there) left out."""
    seen: set[int] = set()
    sizes: dict[str, int] = {}
    for name, tensors in groups.items():
        total = 0
        for t in tensors:
            found = _storage(t)
            if found is None or found[0] in seen or not found[1]:
                continue
            seen.add(found[0])
            if any(m.start <= found[0] < m.end for m in inside):
                continue
            total += found[1]
        sizes[name] = total
    return sizes


def _cache_tensors(caches: Iterable[Any]) -> list[Any]:
    tensors = []
    for cache in caches:
        for layer in getattr(cache, "layers", ()) or ():
            for name in ("key_buffer", "value_buffer", "keys", "values"):
                t = getattr(layer, name, None)
                if t is not None:
                    tensors.append(t)
    return tensors


def engine_groups(engine: Any) -> dict[str, list[Any]]:
    """The engine's tensors by kind (a `LocalEngine` on the fast path; other models: their parameters and buffers)."""
    from spd_lsp.engine import fast
    from spd_lsp.engine.fast.layouts.dense import BlocksTorch

    runner = engine.runner
    caches = [runner.cache] + [cache for cache, _ in runner.parked]
    groups: dict[str, list[Any]] = {"prompt caches (current and parked)": _cache_tensors(caches)}
    backend = fast.attached(engine.loaded.model)
    if backend is None:
        groups["model parameters and buffers"] = [*engine.loaded.model.parameters(), *engine.loaded.model.buffers()]
        return groups
    lm = backend.lm
    copies, layouts = [], []
    for projection in lm.projections():
        for linear in set(projection.linears()):
            if isinstance(linear, BlocksTorch) and linear.copy is not None:
                copies.append(linear.copy)
            layouts.extend(linear.tensors())
    groups["float copies of blocks (BlocksTorch)"] = copies
    groups["projections' layouts (blocks, packed, head)"] = layouts
    groups["embedding"] = list(lm.embedding.parameters()) + list(lm.embedding.buffers())
    groups["rotary tables"] = [t for pair in lm.tables for t in pair]
    groups["norms and biases"] = [t for block in lm.blocks for t in vars(block).values() if hasattr(t, "untyped_storage")]
    groups["norms and biases"] += [lm.norm] + [p.bias for p in lm.projections() if p.bias is not None]
    hf = lm.hf[0]
    if hf is not None:
        groups["the transformers model's own tensors"] = [*hf.parameters(), *hf.buffers()]
    return groups


def other_tensors() -> list[Any]:
    """Every tensor the garbage collector can reach (those above excepted by `classify`'s dedup)."""
    import torch

    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]


def attribute(engine: Any, gguf: Path) -> Attribution:
    maps = mappings()
    resolved = str(gguf.resolve())
    in_gguf = [m for m in maps if m.path == resolved]
    files = [m for m in maps if m.path.startswith("/") and m.path != resolved]
    anonymous = [m for m in maps if not m.path.startswith("/")]
    groups = engine_groups(engine)
    groups["other tensors (gc-reachable)"] = other_tensors()
    return Attribution(rss=sum(m.rss for m in maps), gguf_mapped=sum(m.rss for m in in_gguf),
                       other_files=sum(m.rss for m in files), anonymous=sum(m.rss for m in anonymous),
                       tensors=classify(groups, in_gguf))


class _Mallinfo2(__import__("ctypes").Structure):
    _fields_ = [(name, __import__("ctypes").c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def malloc_info() -> dict[str, int] | None:
    """glibc's own account (mallinfo2): bytes in use in its heaps, free in them, and in its own mmaps; None elsewhere."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):
        return None
    info = libc.mallinfo2()
    return {"heap in use": info.uordblks, "heap free (not given back)": info.fordblks, "mmapped chunks": info.hblkhd}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="the GGUF (default: the bundled model)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--package", default="jinja2")
    parser.add_argument("--malloc", choices=("engine", "default"), default="engine",
                        help="glibc's allocator as `spd-lsp engine` (the default engine) tunes it, or its defaults")
    args = parser.parse_args(argv)
    if args.malloc == "engine":
        from spd_lsp.commands import malloc

        malloc.tune(mmap_threshold=malloc.MMAP_THRESHOLD, trim_threshold=malloc.TRIM_THRESHOLD)

    import torch

    from bench.bench_server import prefixes
    from bench.bench_vs_llamacpp import WARM_TOKENS, package_source
    from spd_lsp.api import DecodeRequest
    from spd_lsp.engine import fast
    from spd_lsp.engine.decoding import lm
    from spd_lsp.engine import memory
    from spd_lsp.engine.local import LocalEngine
    from spd_lsp.engine.model import bundled_gguf, load_model
    from spd_lsp.settings import Settings

    gguf = args.model or bundled_gguf()
    torch.set_num_threads(args.threads)
    lm.cpu_pressure = lambda: None
    loaded = load_model(str(gguf), compile=False)
    engine = LocalEngine(loaded)
    engine.runner.threads = args.threads
    backend = fast.attached(loaded.model)
    if backend is not None:
        backend.prepare()  # the kernels loaded and the plan applied: what serves once settled
    shipped = Settings().decode_options()
    greedy = shipped.but(method="greedy", k=1)
    text = package_source(args.package)
    warm = prefixes(text, WARM_TOKENS, args.rounds, engine.tokenizer)
    cold = prefixes(text[len(text) // 2 :], WARM_TOKENS, args.rounds, engine.tokenizer)
    for r in range(args.rounds):
        for prefix in (warm[r], cold[r]):
            engine.complete(DecodeRequest(prefix, shipped))
            engine.complete(DecodeRequest(prefix, greedy))
            engine.complete(DecodeRequest(prefix, shipped.but(max_tokens=32, stop_at_newline=False, heal=False)))
    time.sleep(memory.IDLE_S + 1)  # settled: the engine gives its transients back once idle
    found = attribute(engine, gguf)
    print(f"model {loaded.name}; {args.rounds} rounds of {WARM_TOKENS}-token prefixes of {args.package}, "
          f"{len(engine.runner.parked)} caches parked; malloc: {args.malloc}")
    if backend is not None:
        info = backend.info
        print(f"spd.status: floatCopyMegabytes {info.get('floatCopyMegabytes')}, residentWeightMegabytes "
              f"{info.get('residentWeightMegabytes')}, parkedCaches {info.get('parkedCaches')}")
    print("\n".join(found.rows(gguf.stat().st_size)))
    print(f"glibc malloc: {', '.join(f'{k} {v / MB:,.0f} MB' for k, v in (malloc_info() or {}).items())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
