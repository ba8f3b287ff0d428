"""torch.compile of the decode step: inductor on the CPU, CUDA graphs on CUDA; eager, said once, where it cannot.

How it compiles (`SPD_LSP_COMPILE`):
- CPU default, "background": the step runs eager until a compiled graph for its shapes (rows, cache bucket) is
  ready. The first step of a new shape hands a twin of its inputs (zeros of the same shapes, dtypes, strides and
  inference mode) to one niced background thread, which compiles on it; from then on steps of that shape run the
  compiled graph. So the model's load and the first requests never wait for inductor (the first compile took
  77-546 s under load here, docs/performance-step.md), and the compiled step still ships.
- "1", and CUDA's default: compile on the first call, in the caller (CUDA graphs are captured in the thread that
  runs them; unmeasured here, no GPU).
- "0": eager (the tests run so, but for the tests of the compile itself).

The compile cache lives in the user cache (`TORCHINDUCTOR_CACHE_DIR`, and Triton's on CUDA), so a later start
reuses the first one's kernels: only dynamo's trace runs again.
"""

from __future__ import annotations

import importlib
import logging
import os
import queue
import shutil
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from spd_lsp.engine.decoding.threads import lower_priority
from spd_lsp.engine.fast.compile_cache import compile_cache_dir, compile_cache_problem, use_compile_cache
from spd_lsp.engine.memory import give_back

log = logging.getLogger(__name__)

COMPILE_ENV = "SPD_LSP_COMPILE"
BACKGROUND, INLINE = "background", "inline"
# While the background thread compiles (dynamo's trace and inductor's codegen are Python: minutes the first time),
# the GIL changes hands this often. At Python's default 5 ms the stepping thread waited at each of its ~750 ops:
# eager steps took 85 ms median, 523 ms p90 during a compile; at 0.2 ms, 30.5 / 33.0 ms (eager alone ~23 ms;
# /tmp probe in docs/performance-step.md, load ~2-4).
SWITCH_INTERVAL_S = 0.0002
# Distinct shapes (rows x bucket) one step function may compile; dynamo's own default (8) is below what a long
# session meets (1 and k rows, buckets 256 ... 8,192).
RECOMPILE_LIMIT = 32
# `hold_background`: no compile thread starts until `release_background` (a process about to fork must have no other
# thread inside torch: a fork copies the locks and OpenMP state that thread holds, and the child hangs on them).
_held = threading.Event()
_waiting: "weakref.WeakSet[Compiled]" = weakref.WeakSet()  # held back with jobs queued
# While a request is served (`serving`), the background compile waits at its next Python call: dynamo's trace and
# inductor's codegen are Python, and the GIL they share with the serving thread's eager steps made warm requests take
# 0.3-2.2 s instead of 0.3-0.5 s (p90 of the first 24 after a start, compile cache warm: 1.58 against 0.48 s,
# `bench/bench_compile_pause.py`), and 4.4-8.1 s in a probe as a graph finished. A wait lasts at most PAUSE_S; one that
# ran out lets the compile run free for as long again, so it still finishes under a steady stream of requests, and a
# lock it holds (an import) cannot stall a request for more than PAUSE_S.
PAUSE_S = 1.0
COMPILE_NICE = 10  # the background compile's thread (a request's threads keep 0)
_requests = 0
_requests_lock = threading.Lock()
_idle = threading.Event()
_idle.set()
_free_until = [0.0]  # monotonic time until which the compile thread does not wait (after a wait ran out)
pauses = [0]  # how often a compile thread waited for a request (tests, benchmarks)


@contextmanager
def serving() -> Iterator[None]:
    """Mark a request being served in this process: a background compile waits for it (`PAUSE_S` at most)."""
    global _requests
    with _requests_lock:
        _requests += 1
        _idle.clear()
    try:
        yield
    finally:
        with _requests_lock:
            _requests -= 1
            if _requests == 0:
                _idle.set()


def _yield_to_requests(frame: Any, event: str, arg: Any) -> None:
    """The compile thread's trace function (`sys.settrace`: Python calls only, no line events): at a call while a
    request is served, wait for it to end, at most `PAUSE_S`."""
    if _idle.is_set() or time.monotonic() < _free_until[0]:
        return None
    pauses[0] += 1
    if not _idle.wait(PAUSE_S):
        _free_until[0] = time.monotonic() + PAUSE_S
    return None


def hold_background() -> None:
    """Queue background compiles without starting their thread (each step of a new shape still runs eager) until
    `release_background`: `spd-lsp engine --standby` holds them while it loads and forks its spare."""
    _held.set()


def release_background() -> None:
    """Start the compiles `hold_background` held back (in this process only: a fork's copy stays held)."""
    _held.clear()
    for compiled in list(_waiting):
        compiled._start_worker()
    _waiting.clear()


def why_not(device: torch.device) -> str | None:
    """Why the step cannot be compiled here (None: it can be tried)."""
    if os.environ.get(COMPILE_ENV) == "0":
        return f"{COMPILE_ENV}=0"
    if device.type not in ("cpu", "cuda"):
        return f"no compiled step on {device.type}"
    if device.type == "cpu" and not (shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
                                     or shutil.which("clang++")):
        return "no C++ compiler for inductor's CPU kernels (install g++ or clang++)"
    use_compile_cache()
    return compile_cache_problem()


def mode_for(device: torch.device) -> str:
    """BACKGROUND or INLINE (see the module's doc)."""
    setting = os.environ.get(COMPILE_ENV)
    if setting == "1":
        return INLINE
    if setting == BACKGROUND:
        return BACKGROUND
    return INLINE if device.type == "cuda" else BACKGROUND


Key = tuple[Any, ...]


# Set once a compile has imported torch._dynamo: until then `mark_dynamic` only notes its dimensions. Importing it
# takes 0.5-0.9 s, which the load's warm-up step paid on the main thread; now the compile thread pays it.
_dynamo_ready = threading.Event()


def dynamic_dims(tensor: torch.Tensor) -> frozenset[int]:
    """The dimensions `mark_dynamic` marked on `tensor` (one graph serves every size there)."""
    return frozenset(getattr(tensor, "_spd_dynamic", ()))


def mark_dynamic(tensor: torch.Tensor, dim: int) -> None:
    """`torch._dynamo.mark_dynamic`, once per tensor and dimension (the step calls it on every buffer each step), once
    dynamo is imported (`use_dynamo`); before, the dimension is only noted on the tensor, for `dynamic_dims` and for
    `use_dynamo` to mark before a compile."""
    if dim in getattr(tensor, "_dynamo_dynamic_indices", ()):
        return  # marked for dynamo (and noted) already: every step's buffers, once a graph is ready
    noted = getattr(tensor, "_spd_dynamic", None)
    if noted is None:
        noted = tensor._spd_dynamic = set()
    noted.add(dim)
    if _dynamo_ready.is_set():
        torch._dynamo.mark_dynamic(tensor, dim)


def use_dynamo(args: Any) -> None:
    """Import torch._dynamo (once) and mark the noted dimensions of `args` (tensors, lists of them) for it: before
    a compile of them."""
    if not _dynamo_ready.is_set():
        importlib.import_module("torch._dynamo")
        _dynamo_ready.set()
    for value in args if isinstance(args, (list, tuple)) else (args,):
        if isinstance(value, (list, tuple)):
            use_dynamo(value)
        elif isinstance(value, torch.Tensor):
            for dim in dynamic_dims(value):
                mark_dynamic(value, dim)


def signature(args: tuple[Any, ...]) -> Key:
    """What dynamo's guards on these arguments look at: each tensor's shape and stride (but for its dynamic
    dimensions), dtype, device, inference mode."""
    def one(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            dynamic = dynamic_dims(value)
            if dynamic:
                shape = tuple(None if i in dynamic else n for i, n in enumerate(value.shape))
                return (shape, value.is_contiguous(), value.dtype, value.device, value.is_inference())
            return (tuple(value.shape), value.stride(), value.dtype, value.device, value.is_inference())
        if isinstance(value, (list, tuple)):
            return tuple(one(v) for v in value)
        return value
    return tuple(one(a) for a in args)


def twin(value: Any) -> Any:
    """Zeros shaped, strided and inference-marked as `value` (lists element by element): inputs to compile on."""
    if isinstance(value, torch.Tensor):
        with torch.inference_mode(value.is_inference()):
            made = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=value.device).zero_()
        for dim in dynamic_dims(value):
            mark_dynamic(made, dim)
        return made
    if isinstance(value, list):
        return [twin(v) for v in value]
    return value


def describe(args: tuple[Any, ...]) -> str:
    """"1 row, 1,024 positions": the shape a step graph is compiled for (the decode step's x and keys)."""
    x, keys = args[0], args[2]
    rows, tokens = x.shape[0], x.shape[1]
    width = f" x {tokens} tokens" if tokens > 1 else ""  # a verification tree's graph
    return f"{rows} row{'s' if rows != 1 else ''}{width}, {keys[0].shape[2]:,} positions"


class LazyCompile:
    """`torch.compile(fn, fullgraph=True, dynamic=False, **how)`, made on its first call: making it imports dynamo
    (~0.5 s) and inductor's ~380 modules (0.19 s), which the background mode does in its compile thread, off the
    model's load."""

    def __init__(self, fn: Callable[..., Any], **how: Any) -> None:
        self.fn, self.how = fn, how
        self._compiled: Callable[..., Any] | None = None
        self._lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None:
            with self._lock:
                if self._compiled is None:
                    # here, not at the load: importing torch._dynamo takes ~0.5 s of a start
                    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
                    self._compiled = torch.compile(self.fn, fullgraph=True, dynamic=False, **self.how)
        return self._compiled(*args)


class Compiled:
    """`fn` compiled (`fullgraph`: a graph break is an error), in the background or on the first call (`mode_for`);
    on any compile failure, `fn` itself from then on, the reason logged once and kept in `reason`.

    `status` (shown in `spd.status`): `compiled` (a compiled graph serves steps, or will on the first call),
    `compileReason` (why not, or "compiling in the background: ..."), `compileSeconds` (the first graph's),
    `compiledShapes` (background: the shapes ready), `compiling` (background: the shape compiling now, or None)."""

    def __init__(self, fn: Callable[..., Any], device: torch.device, *, enabled: bool = True,
                 status: dict[str, Any] | None = None, mode: str | None = None,
                 inductor: dict[str, Any] | None = None, before_compile: Callable[[], None] | None = None,
                 served_otherwise: Callable[[tuple[Any, ...]], str | None] | None = None,
                 off_reason: str = "compile off") -> None:
        """`inductor`: inductor options for the CPU's compile (torch.compile's `options`), e.g. freezing;
        `before_compile`: run before each compile, in the thread that compiles (the step's attention kernel is
        built there); `served_otherwise(args)`: asked after `before_compile`, why inputs shaped as `args` need no graph
        (another path serves them: the fused step, `fused.py`), or None; such a shape is not compiled (`skipped`);
        `off_reason`: what the status says where `enabled` is False."""
        self.fn = fn
        self.before_compile = before_compile
        self.served_otherwise = served_otherwise
        self.skipped: dict[Key, str] = {}  # shapes `served_otherwise` took, and why
        self.otherwise: str | None = None  # why another path serves the steps asked for so far (`served_elsewhere`)
        self.status = status if status is not None else {}
        self.device = device
        self.reason = why_not(device) if enabled else off_reason
        self.mode = mode or mode_for(device)  # `mode`: INLINE or BACKGROUND whatever the environment says
        self.compiled: Callable[..., Any] | None = None
        self.compile_s: float | None = None
        self.calls = 0  # steps run compiled
        self.ready: dict[Key, float] = {}  # background: shapes compiled, and their seconds
        self.queued: set[Key] = set()
        self.compiling: str | None = None
        self._lock = threading.Lock()  # held by the background compile; a step runs compiled only when it is free
        self._jobs: queue.Queue[tuple[Key, tuple[Any, ...], bool, bool, int]] = queue.Queue()
        # The compile thread lives only while there is work: a thread that ran the graph once keeps an OpenMP team
        # of its own, and with more OpenMP threads than cores libgomp throttles its spinning, so every parallel
        # region of the serving thread paid a wake-up: steps took 21.6 ms against 11.8 ms with the thread gone.
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        if self.reason is None:
            use_compile_cache()
            how = {"mode": "reduce-overhead"} if device.type == "cuda" else {"options": inductor} if inductor else {}
            self.compiled = LazyCompile(fn, **how)
        elif enabled and self.reason != compile_cache_problem():  # that one `use_compile_cache` logged, once
            log.info("decode step runs eager: %s", self.reason)
        self._report()

    def _report(self) -> None:
        background = self.mode == BACKGROUND and self.compiled is not None
        reason = self.reason
        if background and not self.ready:
            reason = f"compiling in the background: {self.compiling}" if self.compiling else \
                "compiles in the background on the first step"
        compiled = self.active if not background else bool(self.ready)
        # Nothing compiles and none will until a shape another path does not take is asked for (the fused step's).
        otherwise = (background and not self.ready and self.compiling is None and self.otherwise is not None
                     and self._jobs.empty())
        if otherwise:
            reason = self.otherwise
        # "compiled" (a graph serves, or will on its first call), "background" (being or to be compiled in the
        # background: steps run eager meanwhile), "otherwise" (another path serves the steps: `compileReason` says
        # which), "eager" (no graph: `compileReason` says why)
        state = "compiled" if compiled else "otherwise" if otherwise else "background" if background else "eager"
        self.status.update(compiled=compiled, compileState=state, compileReason=reason,
                           compileSeconds=None if self.compile_s is None else round(self.compile_s, 1))
        if background:
            self.status["compiledShapes"] = len(self.ready)
            self.status["compiling"] = self.compiling  # the shape compiling now, or None

    @property
    def active(self) -> bool:
        """A compiled step is on (background: it may not be ready for a shape yet)."""
        return self.compiled is not None

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            return self.fn(*args)
        if self.mode == BACKGROUND:
            return self._background(args)
        return self._inline(args)

    # -- on the first call, in the caller ---------------------------------------------------------------------
    def _inline(self, args: tuple[Any, ...]) -> Any:
        first = self.calls == 0
        started = time.perf_counter()
        if not _dynamo_ready.is_set():
            use_dynamo(args)
        if first and self.before_compile is not None:
            self.before_compile()
        if self._served_otherwise(signature(args), args):
            return self.fn(*args)
        try:
            out = self.compiled(*args)
        except Exception as exc:  # noqa: BLE001 - any compile failure: the Python wrapper, else eager (`_failed`)
            if self._failed(exc):
                return self._inline(args)  # again, with the Python wrapper
            return self.fn(*args)
        self.calls += 1
        if first:
            self.compile_s = time.perf_counter() - started
            log.info("compiled the decode step in %.1f s (cache: %s)", self.compile_s, compile_cache_dir())
            self._report()
        return out

    def _failed(self, exc: BaseException) -> bool:
        """A compile failed: True where it is worth another try with inductor's Python wrapper (the C++ one is
        inductor's less-used mode: where it does not build a graph, the Python one may; `status`'s `compileNote`
        says so); else eager from then on. (Without Python's headers neither builds: inductor's kernels need them.)"""
        why = f"{type(exc).__name__}: {str(exc)[:300]}"
        compiled = self.compiled
        options = compiled.how.get("options") if isinstance(compiled, LazyCompile) else None
        if options and options.get("cpp_wrapper"):
            self.compiled = LazyCompile(self.fn, **{**compiled.how, "options": {**options, "cpp_wrapper": False}})
            self.status["compileNote"] = f"inductor's C++ wrapper did not build ({why}); its Python wrapper serves"
            log.warning("decode step: %s", self.status["compileNote"])
            return True
        self.compiled, self.reason = None, f"compile failed: {why}"
        log.warning("decode step runs eager: %s", self.reason)
        self._report()
        return False

    # -- in the background ----------------------------------------------------------------------------------
    def _background(self, args: tuple[Any, ...]) -> Any:
        key = signature(args)
        if key in self.ready and self._lock.acquire(blocking=False):
            try:
                compiled = self.compiled
                if compiled is not None:
                    # A shape whose guards still fail (it should not: the key is what they check) runs eager
                    # rather than compiling here, in the caller. (Skipping dynamo's guards, `skip_guard_eval_unsafe`,
                    # measured no faster: 56.6 against 56.5 ms a step, 8 interleaved rounds at load 6.)
                    with torch.compiler.set_stance("eager_on_recompile"):
                        out = compiled(*args)
                    self.calls += 1
                    return out
            finally:
                self._lock.release()
        elif key not in self.ready and key not in self.skipped:
            self.prepare(*args)
        return self.fn(*args)

    def served_elsewhere(self, why: str) -> None:
        """Another path serves the steps (the fused step, from when the plan is applied): the status says so rather
        than a compile that is not coming; a shape that path does not take still compiles when it is asked for."""
        self.otherwise = why
        self.status["notCompiled"] = why
        self._report()

    def _served_otherwise(self, key: Key, args: tuple[Any, ...]) -> bool:
        """Whether `served_otherwise` takes this shape (noted in `skipped` and the status: it is not compiled)."""
        if key in self.skipped:
            return True
        why = self.served_otherwise(args) if self.served_otherwise is not None else None
        if why is None:
            return False
        self.skipped[key] = why
        self.served_elsewhere(why)
        log.info("decode step: %s, not compiled: %s", describe(args), why)
        return True

    def prepare(self, *args: Any) -> None:
        """Background: compile for the shapes of `args` (a twin of them: they are not touched), unless done or queued."""
        key = signature(args)
        if (self.compiled is None or self.mode != BACKGROUND or key in self.ready or key in self.queued
                or key in self.skipped):
            return
        self.queued.add(key)
        self._jobs.put((key, twin(list(args)), torch.is_inference_mode_enabled(), torch.is_grad_enabled(),
                        torch.get_num_threads()))
        if _held.is_set():
            _waiting.add(self)
            return
        self._start_worker()

    def _start_worker(self) -> None:
        with self._worker_lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._compile_jobs, name="spd-compile", daemon=True)
                self._worker.start()

    def _compile_jobs(self) -> None:
        lower_priority(COMPILE_NICE)  # this thread only, and the compiler processes it starts
        sys.settrace(_yield_to_requests)  # this thread only
        try:
            self._compile_queued()
        finally:
            sys.settrace(None)

    def _compile_queued(self) -> None:
        while self.compiled is not None:
            with self._worker_lock:
                if self._jobs.empty():
                    self._worker = None
                    give_back()  # settled: what the compiles freed off the resident memory
                    return
                key, args, inference, grad, threads = self._jobs.get()
            torch.set_num_threads(threads)  # the caller's intra-op threads, for what inductor measures and sizes
            self.compiling = describe(tuple(args))
            self._report()
            log.info("compiling the decode step in the background (%s; cache: %s)", self.compiling,
                     compile_cache_dir())
            started = time.perf_counter()
            interval = sys.getswitchinterval()
            sys.setswitchinterval(min(interval, SWITCH_INTERVAL_S))
            try:
                if self.before_compile is not None:
                    self.before_compile()
                if self._served_otherwise(key, tuple(args)):
                    self.compiling = None
                    self._report()
                    continue
                with self._lock, torch.inference_mode(inference), torch.set_grad_enabled(grad):
                    compiled = self.compiled
                    if compiled is None:
                        return
                    use_dynamo(args)  # the twins were made before dynamo may have been imported
                    compiled(*args)
            except Exception as exc:  # noqa: BLE001 - any compile failure: the Python wrapper, else eager (`_failed`)
                if self._failed(exc):
                    self._jobs.put((key, args, inference, grad, threads))  # again, with the Python wrapper
                    continue
                return
            finally:
                sys.setswitchinterval(interval)
            seconds = time.perf_counter() - started
            self.ready[key] = seconds
            if self.compile_s is None:
                self.compile_s = seconds
            log.info("compiled the decode step for %s in %.1f s: steps of that shape run it now", self.compiling,
                     seconds)
            self.compiling = None
            self._report()

    def wait(self, timeout: float) -> bool:
        """Background: block until every shape handed over so far is compiled (or compiling failed); True if so."""
        deadline = time.monotonic() + timeout
        while self.compiled is not None and len(self.ready) + len(self.skipped) < len(self.queued):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return self.compiled is None or len(self.ready) + len(self.skipped) >= len(self.queued)
