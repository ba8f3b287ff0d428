"""LMDB environments shared process-wide, with a bounded wait for the writer lock.

LMDB forbids opening one environment twice in a process (locks are per process),
so every NgramStore on a path shares one entry here. Across processes LMDB
already gives one writer and never-blocked readers; the extra flock only lets a
writer give up with a clear error instead of hanging behind another process.

Within the process, `set_mapsize` and `close` are only legal with no transaction
open on the environment, so every transaction holds the entry's `gate` shared and
a resize or close holds it exclusively. The map starts large (it is virtual: the
file only grows with its content), so resizes are rare in the first place.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import fasteners
import lmdb

from ngram_db.errors import StoreCorruptError, StoreError, StoreFullError, StoreLockedError

T = TypeVar("T")

INITIAL_MAP_SIZE = 1 << 40  # virtual address space, not disk: the file only grows with its content
_BROKEN = (lmdb.CorruptedError, lmdb.InvalidError, lmdb.VersionMismatchError, lmdb.PanicError, lmdb.BadDbiError)


@dataclass
class SharedEnv:
    path: Path
    env: lmdb.Environment
    writable: bool
    users: int = 0
    write_mutex: threading.Lock = field(default_factory=threading.Lock)
    gate: fasteners.ReaderWriterLock = field(default_factory=fasteners.ReaderWriterLock)
    closed: bool = False

    def resize(self, size: int) -> None:
        """`set_mapsize` with no transaction of this process open (0: adopt another process's size)."""
        with self.gate.write_lock():
            self.env.set_mapsize(size)


_registry: dict[Path, SharedEnv] = {}
_registry_lock = threading.Lock()


def corrupt(path: Path, error: BaseException) -> StoreCorruptError:
    return StoreCorruptError(
        f"n-gram store at {path} is unreadable ({error}); delete that directory and run `spd-lsp index` again"
    )


def acquire(path: Path, *, create: bool) -> SharedEnv:
    """Open (or share the already open) environment at `path`."""
    path = Path(path).expanduser().resolve()
    with _registry_lock:
        shared = _registry.get(path)
        if shared is None:
            shared = _open(path, create)
            _registry[path] = shared
        shared.users += 1
        return shared


def release(shared: SharedEnv) -> None:
    with _registry_lock:
        shared.users -= 1
        if shared.users == 0:
            _registry.pop(shared.path, None)
            with shared.gate.write_lock():  # waits for transactions of other threads to end
                shared.closed = True
                shared.env.close()


def _open(path: Path, create: bool) -> SharedEnv:
    if not (path / "data.mdb").exists():
        if not create:
            raise StoreError(f"no n-gram store at {path}; build one with `spd-lsp index`")
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    writable = os.access(path, os.W_OK)
    try:
        env = lmdb.open(
            str(path),
            map_size=INITIAL_MAP_SIZE,
            readonly=not writable,
            lock=writable,
            readahead=False,
            meminit=False,
            metasync=False,
            mode=0o600,
        )
    except _BROKEN as error:
        raise corrupt(path, error) from error
    except lmdb.Error as error:
        raise StoreError(f"cannot open n-gram store at {path}: {error}") from error
    return SharedEnv(path, env, writable)


@contextmanager
def _writer_lock(path: Path, timeout: float) -> Iterator[None]:
    lock_path = path / "writer.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                    raise StoreLockedError(
                        f"n-gram store at {path} is being written by another process (pid {holder}) "
                        f"for more than {timeout:g}s; retry when it has finished"
                    ) from None
                time.sleep(0.02)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def write(shared: SharedEnv, body: Callable[[lmdb.Transaction], T], *, lock_timeout: float) -> T:
    """Run `body` in one write transaction: all of it commits or none of it does.

    The map doubles and the body reruns when it runs out of room.
    """
    with shared.write_mutex, _writer_lock(shared.path, lock_timeout):
        while True:
            try:
                with shared.gate.read_lock():
                    _check_open(shared)
                    with shared.env.begin(write=True) as txn:
                        return body(txn)
            except lmdb.MapFullError:
                shared.resize(shared.env.info()["map_size"] * 2)
            except lmdb.MapResizedError:
                shared.resize(0)
            except _BROKEN as error:
                raise corrupt(shared.path, error) from error
            except (lmdb.Error, OSError) as error:
                raise _write_failed(shared.path, error) from error


def _write_failed(path: Path, error: BaseException) -> StoreError:
    """A failed commit: name a full disk as such (LMDB reports it as an I/O error)."""
    try:
        fs = os.statvfs(path)
        full = getattr(error, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or fs.f_bavail * fs.f_frsize < 1 << 20
    except OSError:
        full = False
    if full:
        return StoreFullError(f"no space left on the device holding {path}; the n-gram store keeps everything "
                              f"written before; free some space, then index again ({error})")
    return StoreError(f"writing the n-gram store at {path} failed: {error}")


def _check_open(shared: SharedEnv) -> None:
    if shared.closed:
        raise StoreError(f"n-gram store at {shared.path} is closed")


@contextmanager
def read(shared: SharedEnv, buffers: bool = False) -> Iterator[lmdb.Transaction]:
    """A read transaction (with `buffers`, values are zero-copy views valid inside it);
    adopts a map grown by another process."""
    for attempt in range(2):
        with shared.gate.read_lock():
            _check_open(shared)
            try:
                txn = shared.env.begin(buffers=buffers)
            except lmdb.MapResizedError:
                if attempt:
                    raise
            else:
                try:
                    yield txn
                    return
                except _BROKEN as error:
                    raise corrupt(shared.path, error) from error
                finally:
                    txn.abort()
        shared.resize(0)
