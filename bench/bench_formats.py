"""How fast every tensor of a GGUF becomes its layout (`spd_lsp/engine/fast/formats.py`), per weight type.

    PYTHONPATH=. nice -n 5 .venv/bin/python -m bench.bench_formats [GGUF ...] [--rounds 3] [--against-gguf]
    PYTHONPATH=. nice -n 5 .venv/bin/python -m bench.bench_formats --synthetic 256 [--rounds 3]

Default files: the bundled model and, where `bench.gguf_models` made them (~/.cache/spd-lsp/gguf-models), the
SmolLM2-1.7B-shaped random-weight GGUFs. Each round converts every tensor of a file once (the file's pages are read
once before the first round, so the rounds time the conversion, not the disk). Prints per file and type: the bytes
of blocks, the best round's wall and process-CPU seconds, both per GB of blocks, and the largest temporary numpy
allocation beside one tensor's output (tracemalloc's peak minus the output). `--against-gguf` also times gguf-py's
float dequantisation of the same tensors in the same rounds (its wall seconds and our speed-up over it). The load
average is printed before and after: the machine is shared, CPU seconds are the steadier figure. `--synthetic MIB`
instead converts MIB of random blocks of every supported type ([rows, 2048] tensors; no file holds them all).
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

import numpy as np

GGUF_MODELS = Path.home() / ".cache" / "spd-lsp" / "gguf-models"
DEFAULT_1_7B = [f"smollm2-1.7b-random.{kind}.gguf" for kind in ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0", "Q4_1")]


def default_files() -> list[Path]:
    from spd_lsp.engine.model import bundled_gguf

    return [bundled_gguf(), *(path for name in DEFAULT_1_7B if (path := GGUF_MODELS / name).is_file())]


def output_bytes(layout: object) -> int:
    import torch

    tensors = [layout] if isinstance(layout, torch.Tensor) else [t for t in layout if t is not None]
    return sum(t.numel() * t.element_size() for t in tensors)


def measure(path: Path, rounds: int, *, against_gguf: bool) -> None:
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    from spd_lsp.engine.fast.formats import to_layout
    from spd_lsp.engine.gguf.file import GGUFFile

    gguf_file = GGUFFile(path)
    tensors = [(name, info, gguf_file.raw(name)) for name, info in gguf_file.tensors.items()]
    for _, _, raw in tensors:
        np.bitwise_xor.reduce(raw, axis=None)  # page the file in
    sizes: dict[str, int] = defaultdict(int)
    for _, info, raw in tensors:
        sizes[info.type_name] += raw.nbytes
    best: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(lambda: float("inf")))
    temporaries: dict[str, int] = defaultdict(int)
    for round_ in range(rounds):
        spent: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for _, info, raw in tensors:
            kind = info.type_name
            shape = (raw.shape[0], info.shape[-1])
            if round_ == 0:
                tracemalloc.start()
                layout = to_layout(raw, info.type, shape)
                temporaries[kind] = max(temporaries[kind], tracemalloc.get_traced_memory()[1] - output_bytes(layout))
                tracemalloc.stop()
                del layout
            wall, cpu = time.perf_counter(), time.process_time()
            layout = to_layout(raw, info.type, shape)
            spent[kind]["wall"] += time.perf_counter() - wall
            spent[kind]["cpu"] += time.process_time() - cpu
            del layout
            if against_gguf:
                wall = time.perf_counter()
                dequantize(np.asarray(raw), GGMLQuantizationType(info.type))
                spent[kind]["gguf"] += time.perf_counter() - wall
        for kind, figures in spent.items():
            for figure, seconds in figures.items():
                best[kind][figure] = min(best[kind][figure], seconds)
        spent_all = {figure: sum(f[figure] for f in spent.values()) for figure in ("wall", "cpu", "gguf")}
        for figure, seconds in spent_all.items():
            best["all"][figure] = min(best["all"][figure], seconds)
    sizes["all"] = sum(sizes.values())
    temporaries["all"] = max(temporaries.values())
    print(f"\n{path.name} ({sizes['all'] / 2**30:.2f} GiB of tensors, best of {rounds} rounds)")
    header = "| type | GiB | wall s | wall s/GiB | CPU s | CPU s/GiB | largest temporary MiB |"
    print(header + (" gguf-py wall s | × gguf-py |" if against_gguf else ""))
    print("|" + " --- |" * (header.count("|") - 1 + 2 * against_gguf))
    for kind in sorted(sizes, key=lambda k: (k == "all", -sizes[k])):
        gib = sizes[kind] / 2**30
        figures = best[kind]
        row = (f"| {kind} | {gib:.3f} | {figures['wall']:.2f} | {figures['wall'] / gib:.2f} | {figures['cpu']:.2f} | "
               f"{figures['cpu'] / gib:.2f} | {temporaries[kind] / 2**20:.1f} |")
        if against_gguf:
            row += f" {figures['gguf']:.2f} | {figures['gguf'] / figures['wall']:.1f} |"
        print(row, flush=True)


def synthetic(mib: int, rounds: int) -> None:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    from spd_lsp.engine.fast.formats import FLOATS, FORMATS, to_layout

    rng = np.random.default_rng(0)
    print(f"\n{mib} MiB of random blocks a type, [rows, 2048] (best of {rounds} rounds)")
    print("| type | wall s/GiB | CPU s/GiB |\n| --- | --- | --- |")
    for qtype in map(GGMLQuantizationType, [*FORMATS, *FLOATS]):
        block, size = GGML_QUANT_SIZES[qtype]
        row = 2048 // block * size
        raw = rng.integers(0, 256, (mib * 2**20 // row, row), dtype=np.uint8)
        if qtype == GGMLQuantizationType.Q4_0:  # scales -8 d can hold in fp16
            raw.reshape(raw.shape[0], -1, size)[..., 0:2] = np.float16(0.01).reshape(1).view(np.uint8)
        best = {"wall": float("inf"), "cpu": float("inf")}
        for _ in range(rounds):
            wall, cpu = time.perf_counter(), time.process_time()
            layout = to_layout(raw, qtype, (raw.shape[0], 2048))
            best = {"wall": min(best["wall"], time.perf_counter() - wall),
                    "cpu": min(best["cpu"], time.process_time() - cpu)}
            del layout
        gib = raw.nbytes / 2**30
        print(f"| {qtype.name} | {best['wall'] / gib:.2f} | {best['cpu'] / gib:.2f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="GGUF files (default: bundled and 1.7B ones)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against-gguf", action="store_true", help="also time gguf-py's float dequantisation")
    parser.add_argument("--synthetic", type=int, metavar="MIB", help="random blocks of every type instead of files")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}")
    if args.synthetic:
        synthetic(args.synthetic, args.rounds)
    for path in [] if args.synthetic else args.files or default_files():
        measure(path, args.rounds, against_gguf=args.against_gguf)
    print(f"\nload average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
