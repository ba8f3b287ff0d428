"""Cold prefill and how fast a superseded prefill stops, in process, with the bundled model.

For each try: a cold request on a fresh prompt, the same ones `bench_server.py`'s cold
rows send (a ~1,500-token prefix ending mid-line, cut to its last `--tokens` tokens at a
line start as the server's window does): prefill, decode steps and total time; then
another such request cancelled `--cancel-after` ms into its prefill, timing cancel ->
`Cancelled` raised (the chunked prefill checks between chunks), and what it kept.

    nice .venv/bin/python bench/bench_prefill.py [--dtype auto] [--tokens 512] [--tries 5]

`--compare-kernels N` instead times N rounds of a 512-token prefill in 64- and 96-token
chunks and 10 decode steps, with the eager and the SDPA attention kernels, interleaved.
`--compare-threads N` instead times N rounds of a 128-token prefill with 1 torch thread
and with torch's default, interleaved, with the CPU pressure (Linux PSI) at each round.
`--compare-chunks N` instead times N rounds, per dtype (bf16, fp32) and prompt length (512, 2,048),
interleaved: one whole forward, `ModelRunner.prefill` as shipped (chunks sized by a layer's time),
in ~0.3 s chunks (the rule before) and in fixed 96-token chunks, as ratios to the whole forward; then
how long a shipped prefill of 2,048 tokens takes to stop once cancelled at a random moment (max and
median over max(N, `--tries`) tries each), what it kept, and what the next prefill of the prompt costs.
`--threads 1 --clock cpu` measures CPU time of one thread, and the runners size their chunks by it: what an
idle machine would run and measure, on a loaded one (the wall clock sizes them smaller under load).

    nice .venv/bin/python -m bench.bench_prefill --compare-chunks 3 [--threads 1 --clock cpu]

`--compare-prompt-kernel N` instead times N rounds of bf16 prefills of 512 and 2,048 tokens, one forward and as
shipped (chunks on the cache), with a prompt's causal attention on our kernel (engine/kernels/prompt.cpp) and on SDPA,
interleaved, and how much the last logits differ (first: one layer's attention alone). `--compare-pointwise N` the
same with the forward's norms, rotary and SiLU on our fused ops (engine/kernels/pointwise.cpp) and as tensor ops.

    PYTHONPATH=. .venv/bin/python -m bench.bench_prefill --compare-prompt-kernel 5 --threads 2
    PYTHONPATH=. .venv/bin/python -m bench.bench_prefill --compare-pointwise 5 --threads 2
    PYTHONPATH=. .venv/bin/python -m bench.bench_prefill --compare-pointwise 6 --threads 2 --cold

`--cold` with `--compare-pointwise`: cold ~512-token requests in process instead (1 greedy draft and the shipped SPD k=3, the step
and verification's tree compiled first), the switch on and off, interleaved.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from types import SimpleNamespace
from typing import Any

import torch
from transformers import DynamicCache

from bench.bench_server import corpus, prefixes
from spd_lsp.cursor import fit_prefix
from spd_lsp.api import Cancelled, DecodeOptions, DecodeRequest
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.decoding import lm
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.threads import cpu_pressure
from spd_lsp.engine.model import load_model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--cancel-after", type=float, default=150, help="ms into the prefill")
    parser.add_argument("--compare-threads", type=int, default=0, metavar="N")
    parser.add_argument("--compare-kernels", type=int, default=0, metavar="N")
    parser.add_argument("--compare-chunks", type=int, default=0, metavar="N")
    parser.add_argument("--compare-prompt-kernel", type=int, default=0, metavar="N")
    parser.add_argument("--compare-pointwise", type=int, default=0, metavar="N")
    parser.add_argument("--cold", action="store_true", help="with --compare-pointwise: cold requests instead")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="cpu: this thread's CPU time")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.compare_chunks:
        return compare_chunks(args.compare_chunks, time.thread_time if args.clock == "cpu" else time.perf_counter,
                              args.tries)
    if args.compare_kernels:
        return compare_kernels(args.dtype, args.compare_kernels)
    for switch, rounds in (("prompt_kernel", args.compare_prompt_kernel), ("pointwise", args.compare_pointwise)):
        if rounds:
            return (compare_cold if args.cold else compare_switch)(rounds, switch)
    loaded = load_model(dtype=args.dtype)
    engine = LocalEngine(loaded)
    if args.compare_threads:
        return compare_threads(engine, args.compare_threads)
    spans = lambda text: engine.tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
    prompts = [fit_prefix(p, spans, args.tokens) for p in prefixes(corpus(), 1500, 2 * args.tries, engine.tokenizer)]
    options = DecodeOptions(k=3, max_tokens=10)
    cold, prefill, step, steps, stop, kept, tokens = [], [], [], [], [], [], []
    for attempt in range(args.tries):
        prompt, other = prompts[2 * attempt], prompts[2 * attempt + 1]
        result = engine.complete(DecodeRequest(prompt, options))
        cold.append(1000 * result.timings.total_s)
        prefill.append(1000 * result.timings.prefill_s)
        tokens.append(result.timings.prefill_tokens)
        step.append(result.timings.per_step_ms)
        steps.append(result.timings.steps)

        flag = threading.Event()
        cancelled_at: list[float] = []
        timer = threading.Timer(args.cancel_after / 1000, lambda: (cancelled_at.append(time.perf_counter()), flag.set()))
        timer.start()
        try:
            engine.complete(DecodeRequest(other, options), flag.is_set)
        except Cancelled:
            stop.append(1000 * (time.perf_counter() - cancelled_at[0]))
        timer.cancel()
        kept.append(len(engine.runner.cached_ids))
    print(f"model {loaded.name} on {loaded.device} ({loaded.dtype}), prefill chunk {engine.runner.chunk_tokens} tokens")
    print("| measure | median | max |")
    print("| --- | ---: | ---: |")
    for name, values in ((f"cold {args.tokens}-token request", cold), ("its prefill", prefill),
                         ("its decode step", step),
                         (f"cancel -> stopped ({args.cancel_after:.0f} ms into a prefill)", stop)):
        if values:
            print(f"| {name} | {statistics.median(values):.0f} ms | {max(values):.0f} ms |")
    print(f"prefilled tokens {tokens}; decode steps {steps}; torch threads {torch.get_num_threads()}")
    print(f"tokens kept in the cache by the cancelled prefill: {kept}; {len(stop)}/{args.tries} stopped mid-request")
    return 0


def compare_kernels(dtype: str, rounds: int) -> int:
    """Prefill per chunk size and decode steps, per attention kernel, interleaved."""
    models = {kernel: load_model(dtype=dtype, attention=kernel) for kernel in ("eager", "sdpa")}
    ids = models["eager"].tokenizer.encode(corpus(), add_special_tokens=False)
    times: dict[str, list[float]] = {}
    for r in range(rounds):
        prompt = ids[512 * r : 512 * r + 512]
        for kernel, loaded in models.items():
            for chunk in (64, 96):
                runner = ModelRunner(loaded.model, loaded.device, chunk_tokens=chunk, slots=1)
                started = time.perf_counter()
                runner.prefill(prompt)
                times.setdefault(f"{kernel} prefill, {chunk}-token chunks", []).append(time.perf_counter() - started)
            started = time.perf_counter()
            for step in range(10):
                runner.forward(runner.cache, ids=torch.tensor([[prompt[step]]]))
            times.setdefault(f"{kernel} 10 decode steps", []).append(time.perf_counter() - started)
        print(f"round {r}: " + ", ".join(f"{name} {1000 * t[-1]:.0f} ms" for name, t in times.items()), flush=True)
    print(f"torch threads {torch.get_num_threads()}, CPU pressure {cpu_pressure()} %, load {os.getloadavg()[0]:.1f}")
    for name, t in times.items():
        print(f"| {name} | {1000 * statistics.median(t):.0f} ms |")
    return 0


SWITCHES = {"prompt_kernel": ("kernel", "SDPA"), "pointwise": ("fused", "tensor ops")}


def compare_switch(rounds: int, switch: str) -> int:
    """bf16 prefills with one of FastLM's `SWITCHES` on and off (a prompt's attention on our kernel or on SDPA; the
    pointwise ops fused or as tensor ops), one forward and as shipped, interleaved."""
    from spd_lsp.engine import fast

    lm.cpu_pressure = lambda: None  # the threads asked for, whatever the load
    loaded = load_model(dtype="bfloat16")
    backend = fast.attached(loaded.model)
    if backend is None:
        raise SystemExit("no fast path for this model")
    backend.prepare()  # what the compile thread does before the step's first compile
    plan = backend.info["fastPlan"]
    if (plan["attention"]["prompt"] == "sdpa") if switch == "prompt_kernel" else plan["pointwise"] != "ours":
        raise SystemExit(f"the prompt's kernels do not serve here: {backend.state}, {plan['why']}")
    on_name, off_name = SWITCHES[switch]
    if switch == "prompt_kernel":
        attention_alone(loaded.model.config, rounds)
    ids = loaded.tokenizer.encode(corpus(), add_special_tokens=False)
    kinds = {"one forward": dict(chunk_tokens=10**6), "shipped": {}}
    runners = {kind: ModelRunner(loaded.model, loaded.device, slots=1, **kw) for kind, kw in kinds.items()}
    times: dict[tuple[int, str, bool], list[float]] = {}
    differences: dict[int, list[float]] = {}
    for r in range(rounds):
        for length in (512, 2048):
            prompt = ids[(2 * r + 1) * 2048 :][:length]
            logits: dict[bool, torch.Tensor] = {}
            for on in ((True, False) if r % 2 == 0 else (False, True)):
                setattr(backend.lm, switch, on)
                for kind, runner in runners.items():
                    runner.rewind(0)
                    started = time.perf_counter()
                    last, _ = runner.prefill(prompt)
                    times.setdefault((length, kind, on), []).append(time.perf_counter() - started)
                    if kind == "one forward":
                        logits[on] = last.float()
            differences.setdefault(length, []).append(float((logits[True] - logits[False]).abs().max()
                                                            / logits[False].abs().max()))
            print(f"round {r} {length}: " + ", ".join(
                f"{kind} {on_name if on else off_name} {1000 * times[length, kind, on][-1]:.0f} ms"
                for kind in kinds for on in (True, False)) + f"; load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\ntorch threads {torch.get_num_threads()}, {rounds} interleaved rounds; median ms, ratio {on_name} / "
          f"{off_name} (median of the rounds' ratios)")
    print(f"| tokens | prefill | {off_name} | {on_name} | {on_name} / {off_name} | last logits' max difference (x their max) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for length in (512, 2048):
        for kind in kinds:
            ours, theirs = times[length, kind, True], times[length, kind, False]
            ratio = statistics.median(a / b for a, b in zip(ours, theirs))
            print(f"| {length} | {kind} | {1000 * statistics.median(theirs):.0f} | {1000 * statistics.median(ours):.0f} "
                  f"| {ratio:.2f}x | {max(differences[length]):.3f} |")
    return 0


def compare_cold(rounds: int, switch: str) -> int:
    """Cold requests of ~512 tokens in process (`LocalEngine`, the step and verification's tree compiled first, as a
    served engine has them), 1 greedy draft and the shipped SPD k=3, with one of `SWITCHES` on and off, interleaved.
    Not `prompt_kernel`: the tree's graph reads it (it picks the attention), so flipping it would recompile the graph."""
    if switch == "prompt_kernel":
        raise SystemExit("--cold takes --compare-pointwise only: the tree graph reads prompt_kernel, so flipping it "
                         "recompiles; compare two processes (SPD_LSP_PREFILL_KERNEL=0) instead")
    from dataclasses import replace

    from bench.bench_vs_llamacpp import package_source, wait_for_tree
    from spd_lsp.engine import fast
    from spd_lsp.settings import Settings

    lm.cpu_pressure = lambda: None  # the threads asked for, whatever the load
    loaded = load_model(compile=True)
    engine = LocalEngine(loaded)
    engine.runner.threads = torch.get_num_threads()
    backend = fast.attached(loaded.model)
    if backend is None:
        raise SystemExit("no fast path for this model")
    backend.step_fn.wait(timeout=3600)
    shipped = Settings().decode_options()
    greedy = replace(shipped, method="greedy", k=1)
    source = package_source("jinja2")
    wait_for_tree(engine, backend, source, shipped)
    texts = prefixes(source[len(source) // 2 :], 512, 2 * rounds, engine.tokenizer)
    on_name, off_name = SWITCHES[switch]
    rows: dict[tuple[str, bool], list[tuple[float, float, int, float]]] = {}
    for r in range(rounds):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            setattr(backend.lm, switch, on)
            for name, options, text in (("greedy, 1 draft", greedy, texts[2 * r]), ("SPD k=3", shipped, texts[2 * r + 1])):
                engine.runner.parked = []  # nothing cached to continue
                engine.runner.rewind(0)
                started = time.perf_counter()
                timings = engine.complete(DecodeRequest(text, options)).timings
                rows.setdefault((name, on), []).append((1000 * (time.perf_counter() - started), 1000 * timings.prefill_s,
                                                        timings.steps, timings.per_step_ms))
        print(f"round {r}: " + ", ".join(f"{name} {on_name if on else off_name} {row[-1][0]:.0f} ms"
                                         for (name, on), row in rows.items()) + f"; load {os.getloadavg()[0]:.1f}",
              flush=True)
    print(f"\ntorch threads {torch.get_num_threads()}, {rounds} interleaved rounds; medians")
    print(f"| request | {switch} | request ms | prefill ms | steps x ms a step | {on_name} / {off_name} |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for (name, on), row in sorted(rows.items(), key=lambda item: (item[0][0], not item[0][1])):
        ratio = statistics.median(a[0] / b[0] for a, b in zip(rows[name, True], rows[name, False]))
        print(f"| {name} | {on_name if on else off_name} | {statistics.median(x[0] for x in row):.0f} "
              f"| {statistics.median(x[1] for x in row):.0f} | {statistics.median(x[2] for x in row):.0f} x "
              f"{statistics.median(x[3] for x in row):.1f} | {f'{ratio:.2f}x' if on else ''} |")
    return 0


def attention_alone(config: Any, rounds: int) -> None:
    """One layer's attention at the model's shapes (random bf16 q/k/v), our kernel against what served before it:
    SDPA's causal kernel for a prompt, the grouped attention (compiled, as in the tree graph) for a verification tree."""
    from torch.nn import functional as F

    from spd_lsp.engine.decoding.grouped import grouped_attention
    from spd_lsp.engine.kernels.prompt import causal_attention

    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    grouped = torch.compile(lambda q, k, v, m: grouped_attention(q, k, v, m, scaling=dim ** -0.5), dynamic=False)
    cases = []
    for tokens, keys in ((512, 512), (2048, 2048), (20, 526)):
        q = torch.randn(1, heads, tokens, dim, dtype=torch.bfloat16)
        k, v = (torch.randn(1, kv_heads, keys, dim, dtype=torch.bfloat16) for _ in range(2))
        if tokens == keys:
            ours = lambda q=q, k=k, v=v: causal_attention(q, k, v, 0, dim ** -0.5)  # noqa: E731
            theirs = lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # noqa: E731
            cases.append((f"prompt of {tokens}, causal", "SDPA", ours, theirs))
        else:
            mask = torch.ones(1, 1, tokens, keys, dtype=torch.bool)
            ours = lambda q=q, k=k, v=v, m=mask, at=keys - tokens: causal_attention(q, k, v, at, dim ** -0.5, m)  # noqa: E731
            theirs = lambda q=q, k=k, v=v, m=mask: grouped(q, k, v, m)  # noqa: E731
            cases.append((f"tree of {tokens} on {keys - tokens} cached", "grouped, compiled", ours, theirs))

    def per_call(run: Any, calls: int) -> float:
        started = time.perf_counter()
        for _ in range(calls):
            run()
        return (time.perf_counter() - started) / calls

    print("| one layer's attention | before | before ms | ours ms | ours / before (median of rounds) |")
    print("| --- | --- | ---: | ---: | ---: |")
    with torch.inference_mode():
        for name, before, ours, theirs in cases:
            ours(), theirs()
            calls = 3 if "2048" in name else 20
            mine, other = [], []
            for _ in range(rounds):
                mine.append(per_call(ours, calls))
                other.append(per_call(theirs, calls))
            ratio = statistics.median(a / b for a, b in zip(mine, other))
            print(f"| {name} | {before} | {1000 * statistics.median(other):.2f} | {1000 * statistics.median(mine):.2f} "
                  f"| {ratio:.2f}x |", flush=True)
    print()


def compare_chunks(rounds: int, clock: Any, tries: int = 5) -> int:
    """A whole forward, the shipped chunked prefill and 96-token chunks, interleaved; then the shipped one cancelled."""
    threads = torch.get_num_threads()
    lm.cpu_pressure = lambda: None  # the threads asked for, whatever the load
    models = {dtype: load_model(dtype=dtype) for dtype in ("bfloat16", "float32")}
    ids = models["float32"].tokenizer.encode(corpus(), add_special_tokens=False)
    kinds = {"one forward": dict(chunk_tokens=10**6), "shipped (timed chunks)": {},
             "0.3 s chunks (before)": {}, "96-token chunks": dict(chunk_tokens=96)}
    runners = {(dtype, kind): ModelRunner(loaded.model, loaded.device, slots=1, **kw)
               for dtype, loaded in models.items() for kind, kw in kinds.items()}
    for dtype in models:  # the rule before: ~0.3 s chunks of at least 512 tokens, a cancelled chunk dropped
        runners[dtype, "0.3 s chunks (before)"].resumable = False
    lm.time = SimpleNamespace(perf_counter=clock)  # the runners size their chunks by the clock measured
    times: dict[tuple[str, int, str], list[float]] = {}
    chunks: dict[str, int] = {}  # forwards the last prefill of each kind ran
    for r in range(rounds):
        for dtype in models:
            for length in (512, 2048):
                prompt = ids[(2 * r + 1) * 2048 :][:length]
                for kind in kinds:
                    runner = runners[dtype, kind]
                    runner.rewind(0)
                    forwards, started = runner.forwards, clock()
                    runner.prefill(prompt)
                    times.setdefault((dtype, length, kind), []).append(clock() - started)
                    chunks[kind] = runner.forwards - forwards
                whole = times[dtype, length, "one forward"][-1]
                print(f"round {r} {dtype} {length}: " + ", ".join(
                    f"{kind} {1000 * times[dtype, length, kind][-1]:.0f} ms ({chunks[kind]})" for kind in kinds)
                    + f" (shipped: {1000 * runners[dtype, 'shipped (timed chunks)'].token_seconds:.2f} ms/token"
                    f" last chunk); load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\ntorch threads {threads}, clock {clock.__name__}, {rounds} interleaved rounds; median ms (x one forward)")
    print("| dtype | tokens | " + " | ".join(kinds) + " |")
    print("| --- | ---: |" + " ---: |" * len(kinds))
    for dtype in models:
        for length in (512, 2048):
            whole = statistics.median(times[dtype, length, "one forward"])
            cells = [f"{1000 * statistics.median(times[dtype, length, k]):.0f} ({statistics.median(times[dtype, length, k]) / whole:.2f}x)"
                     for k in kinds]
            print(f"| {dtype} | {length} | " + " | ".join(cells) + " |")
    for dtype, loaded in models.items():
        runner = runners[dtype, "shipped (timed chunks)"]
        stops, kept, resumed = [], [], []
        for attempt in range(max(rounds, tries)):
            prompt = ids[(2 * attempt + 2) * 2048 :][:2048]
            runner.rewind(0)
            deadline = clock() + random.Random(attempt).uniform(0.05, 0.9) * 1.5 * sum(
                times[dtype, 2048, "one forward"]) / rounds
            flagged: list[float] = []

            def cancelled() -> bool:
                now = clock()
                if now >= deadline and not flagged:
                    flagged.append(deadline)
                return bool(flagged)

            try:
                runner.prefill(prompt, cancelled)
            except Cancelled:
                stops.append(1000 * (clock() - flagged[0]))
                partial = runner.partial
                kept.append(f"{len(runner.cached_ids)}" + (f"+{len(partial.ids)}@{partial.layer}" if partial else ""))
                started = clock()
                runner.prefill(prompt)  # the next request, for the same prompt: what is left of it
                resumed.append((clock() - started) / statistics.median(times[dtype, 2048, "one forward"]))
        if stops:
            print(f"{dtype}: cancelled 2,048-token prefill stopped {statistics.median(stops):.0f} ms (median), "
                  f"{max(stops):.0f} ms (max) after the cancel, {len(stops)} tries; tokens kept {kept} "
                  "(cached+chunk@the layer it stopped before); the next prefill of the prompt cost "
                  + ", ".join(f"{r:.2f}" for r in resumed) + " x one forward")
    return 0


def compare_threads(engine: LocalEngine, rounds: int) -> int:
    """1 thread vs torch's default for the same 128-token prefills, interleaved."""
    ids = engine.encode(corpus())
    default = engine.runner.threads
    times: dict[int, list[float]] = {1: [], default: []}
    for r in range(rounds):
        for threads in times:
            engine.runner.rewind(0)
            torch.set_num_threads(threads)
            started = time.perf_counter()
            engine.runner.forward(DynamicCache(config=engine.loaded.model.config), ids=torch.tensor([ids[128 * r : 128 * r + 128]]))
            times[threads].append(1000 * (time.perf_counter() - started))
        print(f"round {r}: " + ", ".join(f"{n} thread(s) {t[-1]:.0f} ms" for n, t in times.items())
              + f"; CPU pressure {cpu_pressure()} %, load {os.getloadavg()[0]:.1f}", flush=True)
    print(", ".join(f"{n} thread(s): median {statistics.median(t):.0f} ms" for n, t in times.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
