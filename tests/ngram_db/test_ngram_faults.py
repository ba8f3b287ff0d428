"""Store faults: a full disk (a real, small tmpfs; needs root to mount)."""

from __future__ import annotations

import os
import subprocess

import pytest

from ngram_db.errors import StoreFullError
from ngram_db.store import NgramStore

from tests.ngram_support import BYTES, encode, noisy_text


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                                           capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_is_named_and_loses_nothing_committed(small_disk) -> None:
    with NgramStore.open(small_disk / "store", BYTES) as store:
        committed = 0
        with pytest.raises(StoreFullError, match=f"no space left on the device holding {small_disk / 'store'}"):
            for i in range(1000):
                store.add_file(f"/w/f{i}.py", encode(noisy_text(i, 2000)), content_hash=str(i), size=1, mtime=0.0)
                committed += 1
        assert committed > 0
        assert store.stats().files == committed and store.verify() == []
        assert store.count(encode(noisy_text(0, 2000)[:3])) > 0  # reads go on
    with NgramStore.open(small_disk / "store", BYTES) as store:  # and it reopens intact
        assert store.stats().files == committed and store.verify() == []
