"""Does dynamic int8 (CPU) change draft quality? Greedy drafts, fp32 vs int8, same positions.

    .venv/bin/python bench/bench_int8.py [--positions 40]
"""

from __future__ import annotations

import argparse
import statistics
import sysconfig
from pathlib import Path

from evaluation.positions import matched_prefix, sample_positions
from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import load_model


def evaluate(engine: LocalEngine, positions, method: str = "greedy") -> dict[str, float]:
    exact, chars, steps, drafts = 0, [], [], []
    for position in positions:
        result = engine.complete(DecodeRequest(position.prefix, DecodeOptions(method=method, k=1)))
        text = result.drafts[0].text.strip() if result.drafts else ""
        drafts.append(text)
        exact += text == position.target.strip()
        chars.append(matched_prefix(text, position.target) / len(position.target))
        steps.append(result.timings.per_step_ms)
    return {"P@1": exact / len(positions), "chars": statistics.mean(chars), "step_ms": statistics.median(steps), "drafts": drafts}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--positions", type=int, default=40)
    args = parser.parse_args()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in (stdlib / "json").glob("*.py")) + [stdlib / "argparse.py", stdlib / "shutil.py"]
    positions = sample_positions(files, args.positions, seed=1, prefix_chars=1500)
    results = {}
    for label, quantize in (("fp32", None), ("int8", "int8")):
        results[label] = evaluate(LocalEngine(load_model(quantize=quantize)), positions)
    agree = statistics.mean(a == b for a, b in zip(results["fp32"]["drafts"], results["int8"]["drafts"]))
    print(f"{len(positions)} positions (start of indented lines, stdlib json/argparse/shutil), greedy, healing on")
    print("| weights | exact line P@1 | line chars matched | ms / decode step |")
    print("| --- | ---: | ---: | ---: |")
    for label, r in results.items():
        print(f"| {label} | {r['P@1']:.1%} | {r['chars']:.1%} | {r['step_ms']:.1f} |")
    print(f"int8 draft identical to fp32 draft: {agree:.1%}")


if __name__ == "__main__":
    main()
