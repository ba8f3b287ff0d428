"""Background threads' priority: `niced` runs work (and the compilers it starts) below the requests' threads."""

import os
import subprocess
import sys
import threading

import pytest

from spd_lsp.engine.decoding.threads import niced


def own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_niced_work_runs_at_that_priority_and_the_caller_keeps_its_own():
    before = own_nice()
    seen = niced(own_nice, nice=min(19, before + 5), name="test-niced")
    assert seen == min(19, before + 5)
    assert own_nice() == before


def test_a_process_started_by_niced_work_inherits_its_priority():
    before = own_nice()
    child = niced(lambda: subprocess.run([sys.executable, "-c", "import os; print(os.nice(0))"], capture_output=True,
                                         text=True, check=True).stdout, nice=min(19, before + 7), name="test-niced")
    assert int(child) == min(19, before + 7)  # a compiler started by the kernel build runs at the build's nice


def test_niced_work_raises_in_the_caller():
    def fails():
        raise ValueError("no compiler")

    with pytest.raises(ValueError, match="no compiler"):
        niced(fails, nice=19, name="test-niced")


def test_the_kernel_library_builds_at_the_lowest_priority_and_a_built_one_loads_in_the_caller(monkeypatch):
    from spd_lsp.engine.fast import backend

    seen = []
    monkeypatch.setattr(backend.kernel_library, "build", lambda: seen.append(own_nice()) or True)
    monkeypatch.setattr(backend.kernel_library, "built", lambda: False)
    assert backend.FastBackend._library()
    monkeypatch.setattr(backend.kernel_library, "built", lambda: True)
    assert backend.FastBackend._library()
    assert seen == [max(own_nice(), backend.BUILD_NICE), own_nice()]
