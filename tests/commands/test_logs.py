"""The commands' log on a full disk or an unopenable path: one clear line, and the log goes on to stderr."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from spd_lsp.commands.logs import configure_logging


@pytest.fixture
def root_logging():
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        if handler not in saved[0]:
            handler.close()
    root.handlers[:], root.level = saved[0], saved[1]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a file whose writes fail with ENOSPC)")
def test_a_full_disk_under_the_log_file_is_said_once_and_the_log_goes_on_to_stderr(root_logging, capfd) -> None:
    """Before: `logging` printed '--- Logging error ---' and a traceback to stderr for every record."""
    configure_logging("/dev/full", "INFO")
    log = logging.getLogger("spd_lsp.test")
    for i in range(3):
        log.info("record %d", i)
    err = capfd.readouterr().err
    assert err.count("cannot write the log file /dev/full") == 1 and "No space left" in err
    assert "Traceback" not in err and "Logging error" not in err
    assert all(f"record {i}" in err for i in range(3))


def test_a_log_file_that_cannot_be_opened_logs_to_stderr(root_logging, capfd, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    configure_logging(str(blocker / "spd.log"), "INFO")  # its folder would be a file
    logging.getLogger("spd_lsp.test").warning("still heard")
    err = capfd.readouterr().err
    assert "cannot open the log file" in err and "still heard" in err
