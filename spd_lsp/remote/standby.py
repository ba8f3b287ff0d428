"""The standby engine: a spare of the loaded `auto` engine that takes its socket over when it dies.

The engine serving a Unix socket holds that socket's serving lock (`fcntl.flock` on
`engine-<key>.serving`). With a standby, once it has loaded and holds the lock it forks: the
child is the spare. It shares the parent's weights copy-on-write (nothing writes them), so it
costs neither a model load nor a second copy of the weights, and it waits on the lock. The
kernel releases the lock when the serving engine's process ends, however it ends (`kill -9`
included): the spare takes the lock, writes the pid file, forks a spare of its own and serves
the same socket path (asyncio replaces the dead engine's socket file), where the front ends'
reconnect finds it. A clean exit (idle, SIGTERM) ends the spare first, so no engine outlives
the one that was stopped.

What makes a fork safe (GNU libgomp is not fork-safe): the forking thread's OpenMP team is ended before the
fork (`engine.decoding.threads.release_openmp`, else the child hangs in its first parallel region: its copy of
the team has no threads), and no other thread runs torch meanwhile (the background compile is held until the
spare is forked: a thread inside a parallel region or holding a lock during the fork leaves the child a copy it
hangs on). `bench/bench_standby_fork.py` counts the hangs.

A fork, not a fresh process: a fresh spare loads the model again (~7 s of CPU, niced or not)
and keeps its own copy of the weights (measured: +594 MB PSS, all of it anonymous memory:
transformers copies the weights out of the safetensors map). Not on CUDA (a CUDA context
does not survive a fork): there the engine serves without a spare.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import time
from collections import deque
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)
SELF_TEST_S = 20  # a spare whose first decode does not finish in this long is broken: SIGALRM ends it (and front
# ends start a fresh engine). Seen before `before_fork` released OpenMP: a fork hanging there (docs/faults.md)
# The spare's self-test waits until its engine is quiet (under QUIET_SHARE of a core over the last QUIET_S), at most
# QUIET_WAIT_S (an engine compiling in the background stays busy): run at once, it landed on the engine's first
# request (docs/faults.md).
QUIET_S, QUIET_SHARE, QUIET_WAIT_S = 1.0, 0.1, 120.0
POLL_S = 0.25


def serving_lock(socket_path: Path) -> Path:
    """Held (flock) by the engine serving the socket; it holds that engine's pid."""
    return socket_path.with_suffix(".serving")


def held(socket_path: Path) -> bool:
    """Whether an engine serves (or is taking over) `socket_path`: its serving lock is held."""
    try:
        fd = os.open(serving_lock(socket_path), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False  # free (released at once: a spare waiting for it gets it a moment later)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def standby_file(socket_path: Path) -> Path:
    """The spare's pid (front ends wait for it instead of starting another engine)."""
    return socket_path.with_suffix(".standby")


def pid_file(socket_path: Path) -> Path:
    """The engine serving (or loading for) this socket: `daemon.Paths.pid`."""
    return socket_path.with_suffix(".pid")


class Turn:
    """This process's turn at serving a socket: the serving lock, and the spare waiting for it."""

    def __init__(self, socket_path: Path, fd: int, spare: int | None, took_over: bool) -> None:
        self.socket_path, self._fd, self.spare, self.took_over = socket_path, fd, spare, took_over

    @classmethod
    def take(cls, socket_path: Path, *, standby: bool, self_test: Callable[[], None] | None = None,
             before_fork: Callable[[], object] | None = None) -> "Turn":
        """Block until this process holds `socket_path`'s serving lock (at once for the first engine; a
        spare waits here for the engine it was forked from to die); with `standby`, fork a spare first.
        Returns in the process that is to serve now. `before_fork`: makes the process safe to fork (the
        caller's other threads must be out of torch by then: `engine.fast.compile.hold_background`)."""
        fd = _lock(socket_path)
        took_over = False
        while standby:
            if before_fork is not None:
                before_fork()
            pid = os.fork()
            if pid:
                _write(standby_file(socket_path), str(pid))
                break
            # The spare: drop the parent's hold on the lock (the same open file), check the fork decodes, wait.
            os.close(fd)
            if self_test is not None:
                wait_until_quiet(os.getppid(), timeout=QUIET_WAIT_S)
                signal.alarm(SELF_TEST_S)
                try:
                    self_test()
                except Exception:  # a spare that cannot decode is no spare
                    log.exception("the standby engine failed its first decode: no standby")
                    os._exit(1)
                signal.alarm(0)
            fd = _lock(socket_path)
            took_over = True
            log.warning("the engine serving %s is gone: this standby (pid %d) serves it now", socket_path, os.getpid())
        _write(pid_file(socket_path), str(os.getpid()))
        return cls(socket_path, fd, pid if standby else None, took_over)

    def status(self) -> dict[str, object]:
        """For the engine's status: the spare's pid and whether it is still there; whether this engine
        was a spare that took over."""
        if self.spare is None:
            return {"standby": None, "tookOver": self.took_over}
        return {"standby": {"pid": self.spare, "alive": self._spare_alive()}, "tookOver": self.took_over}

    def _spare_alive(self) -> bool:
        try:
            done, _ = os.waitpid(self.spare, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def close(self) -> None:
        """End the spare (it must not take over from a clean exit), then give up the lock."""
        if self.spare is not None and self._spare_alive():
            os.kill(self.spare, signal.SIGKILL)
            os.waitpid(self.spare, 0)
        self.spare = None
        standby_file(self.socket_path).unlink(missing_ok=True)
        os.close(self._fd)


def cpu_seconds(pid: int) -> float | None:
    """The CPU time process `pid` has used (all its threads), from /proc; None where it is gone or not readable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


def wait_until_quiet(parent: int, *, timeout: float, quiet: float = QUIET_S, share: float = QUIET_SHARE) -> bool:
    """Wait until process `parent` used under `share` of a core over the last `quiet` seconds (True), or it ended (no
    longer this process's parent), or `timeout` passed, or its CPU time cannot be read (False)."""
    used = deque(maxlen=round(quiet / POLL_S) + 1)  # its CPU seconds, a sample every POLL_S
    deadline = time.monotonic() + timeout
    while (now := cpu_seconds(parent)) is not None and os.getppid() == parent and time.monotonic() < deadline:
        used.append(now)
        if len(used) == used.maxlen and used[-1] - used[0] < share * quiet:
            return True
        time.sleep(POLL_S)
    return False


def _lock(socket_path: Path) -> int:
    fd = os.open(serving_lock(socket_path), os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by what we exec
    started = time.monotonic()
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)  # who serves: `serving_pid`
    except OSError as exc:  # a full disk: the lock still works, only the pid in it is missing
        log.warning("could not write the pid into %s: %s", serving_lock(socket_path), exc)
    waited = time.monotonic() - started
    if waited > 1.0:
        log.info("waited %.0f s for %s", waited, serving_lock(socket_path))
    return fd


def serving_pid(socket_path: Path) -> int | None:
    """The pid of the engine that holds `socket_path`'s serving lock, if one does."""
    if not held(socket_path):
        return None
    try:
        return int(serving_lock(socket_path).read_text())
    except (OSError, ValueError):
        return None


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:  # a full disk: the socket answering is what front ends wait for
        log.warning("could not write %s: %s", path, exc)
