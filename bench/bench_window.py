"""How often typing re-prefills the prompt: the old left cut per request vs the hysteresis window.

Types `--chars` characters of a real ~5,000-line file (the project's sources) one at
a time from `--starts` places, with the bundled model's tokenizer and the CPU token
budget, and counts for each request the prompt tokens the KV cache cannot reuse
(those after the common prefix with the previous request's prompt, as
`ModelRunner.prefill` does). No model runs: only the tokenizer.

    .venv/bin/python -m bench.bench_window [--chars 2000] [--starts 3] [--budget 512]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from bench.bench_server import corpus
from spd_lsp.settings import CPU_PREFIX_TOKENS
from spd_lsp.cursor import Window, fit_prefix, fit_window
from spd_lsp.engine.decoding.lm import common_prefix_length
from spd_lsp.engine.model import load_tokenizer
from spd_lsp.session.session import token_ids, token_spans


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, default=2000, help="characters typed from each start")
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--budget", type=int, default=CPU_PREFIX_TOKENS)
    args = parser.parse_args()
    tokenizer = load_tokenizer(None)
    encode, spans = token_ids(tokenizer), token_spans(tokenizer)
    text = corpus()
    lines = text.count("\n")
    refill: dict[str, list[int]] = {"left cut per request (before)": [], "hysteresis window (now)": []}
    for n in range(args.starts):
        start = len("\n".join(text.split("\n")[: (n + 1) * lines // (args.starts + 1)])) + 1
        previous_ids: dict[str, list[int]] = {name: [] for name in refill}
        window: Window | None = None
        for end in range(start, start + args.chars):
            prefix = text[:end]
            window = fit_window(prefix, encode, spans, args.budget, window)
            prompts = {
                "left cut per request (before)": encode(fit_prefix(prefix, spans, args.budget)),
                "hysteresis window (now)": window.ids,
            }
            for name, ids in prompts.items():
                if previous_ids[name]:
                    refill[name].append(len(ids) - common_prefix_length(previous_ids[name], ids))
                previous_ids[name] = ids
    print(f"{lines} lines; {args.starts} x {args.chars} characters typed, a request per character; budget {args.budget}")
    print("| prompt | requests | re-prefill > 32 tokens | mean tokens re-prefilled |")
    print("| --- | ---: | ---: | ---: |")
    for name, values in refill.items():
        share = sum(v > 32 for v in values) / len(values)
        print(f"| {name} | {len(values)} | {share:.1%} | {statistics.fmean(values):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
