"""How many threads torch runs a forward with: one on an oversubscribed CPU (`ModelRunner` asks per forward); the
priority of background threads (and the compilers they start)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

CPU_PRESSURE = Path("/proc/pressure/cpu")
# Above this share of the last 10 s with runnable tasks waiting for a CPU, the machine is
# oversubscribed and torch's threads spend each parallel region waiting for a sibling that
# is not scheduled: measured here at load ~20 on 2 cores, a 128-token prefill took 19 s with
# 2 threads and 0.5 s with 1 (bench/bench_prefill.py --compare-threads 6).
CONTENDED_PERCENT = 50.0


def cpu_pressure(path: Path = CPU_PRESSURE) -> float | None:
    """Linux PSI `some avg10` of the CPU, in percent; None where the system does not report it."""
    try:
        first = path.read_text().splitlines()[0]
        return float(dict(field.split("=", 1) for field in first.split()[1:])["avg10"])
    except (OSError, IndexError, KeyError, ValueError):
        return None


def intra_op_threads(default: int, pressure: float | None) -> int:
    """torch's threads per forward: one on an oversubscribed CPU, else `default`."""
    return 1 if pressure is not None and pressure >= CONTENDED_PERCENT else default


OMP_PAUSE_HARD = 2  # omp_pause_resource_t


def release_openmp() -> bool:
    """End this thread's OpenMP team (`omp_pause_resource_all`), so that a `fork()` right after it leaves the child
    a runtime it can start a team of its own in; True where the runtime did. GNU libgomp is not fork-safe: a child
    forked after its parent ran a parallel region hangs in its own first one (its team's threads were not copied:
    bench/bench_standby_fork.py, docs/faults.md). The parent's next parallel region starts a new team."""
    import ctypes

    try:
        pause = ctypes.CDLL(None).omp_pause_resource_all  # the OpenMP runtime torch loaded (global symbols)
    except (AttributeError, OSError):
        return False  # no OpenMP runtime, or one of before OpenMP 5.0
    pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
    return pause(OMP_PAUSE_HARD) == 0


def lower_priority(nice: int) -> None:
    """This thread's nice value raised to `nice` (Linux: a thread's nice value is its own, and the processes it starts,
    a compiler, inherit it); nothing where the system does not allow it. Never lowered back: an unprivileged process
    cannot, so a thread that must keep its priority runs the work in `niced` instead."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except (AttributeError, OSError):
        pass


def niced(work: Callable[[], T], *, nice: int, name: str) -> T:
    """`work()` run in a thread of its own at `nice` (and what it starts), waited for; its result or its exception."""
    out: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        lower_priority(nice)
        try:
            out.append(work())
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller
            failed.append(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return out[0]
