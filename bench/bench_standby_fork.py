"""How often a standby's fork hangs in its first decode (docs/faults.md, "kill -9").

Loads the model once, as `spd-lsp engine --standby` does, then forks spares as `remote/standby.py` does,
in a chain: each spare runs its first decode (the self-test) under an alarm, then takes over at once: it forks
a spare of its own, lets its background compile run and serves a few requests while that spare checks itself.
A spare the alarm ends is a hang; its parent forks another. Prints the hangs out of the forks.

    PYTHONPATH=$PWD .venv/bin/python -m bench.bench_standby_fork --forks 20 [--unsafe] [--tiny] [--pressure]

`--unsafe`: fork as before the fix: no OpenMP release before the fork, and the background compile free to
start before it (so a takeover may fork while its compile thread runs).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

ALARM_S = 20


def _decode(engine) -> None:
    from spd_lsp.api import DecodeOptions, DecodeRequest

    engine.complete(DecodeRequest("def f():\n    return", options=DecodeOptions(k=2, max_tokens=2)))


def _serve(engine, forks: int, out: int, *, safe: bool) -> None:
    """This process serves now: fork spares until one passes its self-test (or `forks` run out)."""
    from spd_lsp.engine.decoding.threads import release_openmp
    from spd_lsp.engine.fast import compile as step_compile

    while forks > 0:
        forks -= 1
        if safe:
            release_openmp()
        pid = os.fork()
        if pid == 0:  # the spare: its self-test, then it takes over
            signal.alarm(ALARM_S)
            _decode(engine)
            signal.alarm(0)
            os.write(out, b"o")
            _serve(engine, forks, out, safe=safe)
            os._exit(0)
        if safe:
            step_compile.release_background()
        for _ in range(3):  # serving while the spare checks itself
            _decode(engine)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
            os.write(out, b"h")
            continue
        return


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--unsafe", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="the tiny random model of the tests")
    parser.add_argument("--pressure", action="store_true",
                        help="let the CPU's pressure pick torch's threads (one on a busy machine: then no fork hangs); "
                        "by default every forward runs with all threads, as on a quiet machine")
    args = parser.parse_args()
    from spd_lsp.engine.decoding import lm
    from spd_lsp.engine.fast import compile as step_compile

    if not args.pressure:
        lm.cpu_pressure = lambda: None  # the hang needs a parallel region: one thread (a busy CPU) never runs one

    safe = not args.unsafe
    if safe:
        step_compile.hold_background()
    started = time.monotonic()
    if args.tiny:
        from spd_lsp.engine.local import LocalEngine
        from tests.tiny_models import tiny_model

        engine = LocalEngine(tiny_model("llama"))
    else:
        from spd_lsp.api import ModelSpec
        from spd_lsp.engine.loading import load_local

        engine = load_local(ModelSpec(device="cpu")).engine
    print(f"loaded in {time.monotonic() - started:.1f} s; {'safe' if safe else 'unsafe'} forks, alarm {ALARM_S} s",
          flush=True)
    read, write = os.pipe()
    from spd_lsp.engine.decoding.threads import release_openmp

    release_openmp()  # this fork is the bench's own (a process to run the chain in): a clean one either way
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _serve(engine, args.forks, write, safe=safe)
        os._exit(0)
    os.close(write)
    results = b""
    while chunk := os.read(read, 64):
        results += chunk
        sys.stdout.write(chunk.decode())
        sys.stdout.flush()
    os.waitpid(pid, 0)
    print(f"\n{'safe' if safe else 'unsafe'}: {results.count(b'h')} of {len(results)} forks hung in their first decode")


if __name__ == "__main__":
    main()
