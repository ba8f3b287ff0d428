"""The per-user engine: found at, or started on, an owner-only Unix socket.

`user_runtime_dir("spd-lsp")` (mode 0700) holds one socket per model setting
(`engine-<key>.sock`, 0600), its start lock and its log. Two front ends starting at
once take the lock in turn: the second finds the first one's engine answering.
The engine exits after `IDLE_TIMEOUT_S` without connections; the next request
starts it again. With `standby` it keeps a spare that takes the socket over when it dies
(`remote/standby.py`); front ends wait for that spare instead of starting another engine.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import fasteners
import platformdirs

from spd_lsp.api import ModelSpec
from spd_lsp.remote import protocol, standby as spare

log = logging.getLogger(__name__)
IDLE_TIMEOUT_S = 600.0
_started: list[subprocess.Popen] = []  # engines this process started: reaped once they exit
START_TIMEOUT_S = 180.0  # loading the model from a cold disk


@dataclass(frozen=True)
class Paths:
    socket: Path
    lock: Path
    log: Path
    pid: Path  # the engine last started for this socket: while it loads, nobody starts another


def model_args(spec: ModelSpec) -> list[str]:
    """The `spd-lsp engine` flags that select the model `spec` names (and name its socket); the engine reads them
    back into the same spec (commands/engine.py, generated from the settings' schema)."""
    args = ["--device", spec.device, "--dtype", spec.dtype, "--quantize", spec.quantize,
            "--fast-path" if spec.fast_path else "--no-fast-path", "--output-weights", spec.head]
    args += ["--kernels", *spec.kernels] if spec.kernels else []  # the fast path's kernels left out
    return (["--model", spec.path] if spec.path else []) + args


def runtime_dir() -> Path:
    """The user's runtime directory for spd-lsp, created owner-only (and refused if it is not ours)."""
    path = Path(platformdirs.user_runtime_dir("spd-lsp"))
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to uid {info.st_uid}, not to you")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def paths_for(model_args: list[str]) -> Paths:
    """One engine per user, machine, model setting and protocol version (a front end never finds an
    engine of another version at its socket: an upgrade starts its own, the old one idles out)."""
    key = hashlib.sha256("\0".join([f"protocol {protocol.VERSION}", *model_args]).encode()).hexdigest()[:12]
    root = runtime_dir()
    return Paths(root / f"engine-{key}.sock", root / f"engine-{key}.lock", root / f"engine-{key}.log",
                 root / f"engine-{key}.pid")


def answering(path: Path) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    try:
        sock.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def ensure(model_args: list[str], *, idle_timeout: float = IDLE_TIMEOUT_S,
           start_timeout: float = START_TIMEOUT_S, standby: bool = False) -> Path:
    """The socket of this user's engine for `model_args`, started (once) if none answers.

    Waits at most `start_timeout` for it to answer (TimeoutError): a front end whose engine
    was killed waits a few seconds and answers no drafts meanwhile, while the engine it
    started goes on loading; the next call waits for that one instead of starting another.
    `standby`: the engine it starts keeps a spare (`remote/standby.py`); an engine already
    running keeps what it was started with.
    """
    _started[:] = [process for process in _started if process.poll() is None]
    paths = paths_for(model_args)
    if answering(paths.socket):
        return paths.socket
    with fasteners.InterProcessLock(str(paths.lock)):
        if answering(paths.socket):  # another front end started it while we waited
            return paths.socket
        if not (_loading(paths) or _ours_loading(paths)):
            paths.socket.unlink(missing_ok=True)  # a dead engine's socket
            log.info("starting an engine for %s", paths.socket)
            command = [sys.executable, "-m", "spd_lsp.cli", "engine", "--socket", str(paths.socket),
                       "--idle-timeout", str(idle_timeout), *model_args] + (["--standby"] if standby else [])
            with open(paths.log, "ab") as out:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                           start_new_session=True)  # outlives the front end that started it
            _started.append(process)
            try:
                paths.pid.write_text(str(process.pid))
            except OSError as exc:  # a full disk: this process still knows it started one (_ours_loading)
                log.warning("could not write %s: %s", paths.pid, exc)
    deadline = time.monotonic() + start_timeout
    while not answering(paths.socket):
        mine = next((p for p in _started if str(paths.socket) in p.args), None)
        if mine is not None and mine.poll() is not None and not _loading(paths):
            reason = last_line(paths.log)  # its own error (a missing model names the file), for the user's message
            raise RuntimeError(f"the engine exited with {mine.returncode} while starting"
                               f"{f': {reason}' if reason else ''}; see {paths.log}")
        if time.monotonic() > deadline:
            if not (_loading(paths) or _ours_loading(paths)):
                raise TimeoutError(f"no engine is loading for {paths.socket}; see {paths.log}")
            raise TimeoutError(f"the engine is still starting after {start_timeout:.0f} s; see {paths.log}")
        time.sleep(0.05)
    return paths.socket


def last_line(log: Path, *, tail_bytes: int = 4096) -> str:
    """The last non-empty line of an engine's log (its error where it exited while starting); '' if none."""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - tail_bytes))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _ours_loading(paths: Paths) -> bool:
    return any(str(paths.socket) in process.args and process.poll() is None for process in _started)


def _loading(paths: Paths) -> bool:
    """Whether the engine last started for `Paths.socket` (or its standby, taking over) is alive: so it
    is loading, or serving."""
    return spare.held(paths.socket) or any(_alive(pid_path, paths.socket)
                                           for pid_path in (paths.pid, spare.standby_file(paths.socket)))


def _alive(pid_path: Path, socket_path: Path) -> bool:
    try:
        pid = int(pid_path.read_text())
    except (OSError, ValueError):
        return False
    try:
        return str(socket_path).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()  # not a reused pid (a zombie's is empty)
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): alive is the best we know
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False

