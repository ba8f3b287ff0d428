"""The standby's fork (remote/standby.py) decodes: a spare forked from an engine that ran torch's parallel regions
(OpenMP) passes its first parallel op, and so does the spare of a spare that took over (issue 24: such forks hung
in their first decode, so the standby shipped off)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.engine_support import REPO, wait_gone

# A process that serves a socket with a standby, as `spd-lsp engine --standby` does, with a parallel region run
# before each fork (the load's and the serving engine's) and one as the spare's self-test; each process that
# serves prints its spare's pid, each spare that passed its self-test writes its pid to MARKER.
ENGINE = """
import os, sys, time
from pathlib import Path
import torch
from spd_lsp.engine.decoding.threads import release_openmp
from spd_lsp.remote.standby import Turn

torch.set_num_threads(2)  # a parallel region (what a busy machine's one thread never runs)
def parallel():
    torch.ones(4_000_000).add_(1).sum()
def self_test():
    parallel()
    Path(sys.argv[2]).write_text(str(os.getpid()))
parallel()
turn = Turn.take(Path(sys.argv[1]), standby=True, self_test=self_test, before_fork=release_openmp)
parallel()  # serving
print(turn.spare, flush=True)
time.sleep(120)
"""


def _passed(marker: Path, pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.exists() and marker.read_text() == str(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_spare_and_a_takeovers_spare_pass_their_first_parallel_op(tmp_path: Path) -> None:
    """Failed before its fix (`before_fork=release_openmp`): the spare hung in its first parallel region (a copy
    of its parent's OpenMP team, without the team's threads) until the self-test's alarm ended it."""
    sock, marker = tmp_path / "engine.sock", tmp_path / "passed"
    process = subprocess.Popen([sys.executable, "-c", ENGINE, str(sock), str(marker)], cwd=REPO, text=True,
                               stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    pids = [process.pid]
    try:
        spare = int(process.stdout.readline())
        pids.append(spare)
        assert _passed(marker, spare), "the spare did not pass its first parallel op"
        os.kill(process.pid, signal.SIGKILL)  # the spare takes over and forks a spare of its own
        assert wait_gone(process.pid)
        second = int(process.stdout.readline())  # printed by the spare, serving now
        pids.append(second)
        assert _passed(marker, second), "the spare of the spare that took over did not pass its first parallel op"
    finally:
        for pid in reversed(pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait()
