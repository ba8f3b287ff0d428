"""Front ends and engines of different releases (remote/protocol.py, Compatibility): this checkout's front end
against the engine of the previous protocol's last commit, and that commit's front end against this engine, both
real processes with a tiny model. A clear error or a working answer, never a crash.

The previous code comes from git (`git archive PREVIOUS`): the test needs the repository's history (a shallow
clone skips it, saying so).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.remote.connect import load_remote
from spd_lsp.settings import Settings
from tests.engine_support import REPO, engine_env, start_engine

# The last commit of version 2 whose engine refuses fields it does not know and whose front end sends every decode
# option flat (before the experimental ones were split off and unknown fields ignored).
PREVIOUS = "fe2b90f1d8e4ed955e14fd91e5af781581975efa"
PREVIOUS_LOADER = "tests.engined_support:tiny_loaded"  # the tiny-model engine as the previous commit names it
PREFIX = "def add(a, b):\n    return"


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous commit's spd_lsp, ngram_db and test engine, unpacked: an import root for PYTHONPATH."""
    git = ["git", "-C", str(REPO)]
    if subprocess.run([*git, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True).stdout.strip() == "true":
        pytest.skip(f"a shallow clone holds no {PREVIOUS[:7]}: fetch the history to run the compatibility test")
    root = tmp_path_factory.mktemp("previous")
    archive = subprocess.run([*git, "archive", PREVIOUS, "spd_lsp", "ngram_db", "tests/__init__.py",
                              "tests/engined_support.py", "tests/tiny_models.py"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root


def previous_env(root: Path, runtime: Path) -> dict[str, str]:
    """The previous commit first on the path, its own test engine as the loader."""
    return {**engine_env(runtime), "PYTHONPATH": str(root), "SPD_LSP_ENGINE_LOADER": PREVIOUS_LOADER}


@pytest.fixture(scope="module")
def previous_engine(previous: Path, tmp_path_factory: pytest.TempPathFactory):
    runtime = tmp_path_factory.mktemp("previous-engine")
    socket = runtime / "engine.sock"
    process = subprocess.Popen([sys.executable, "-m", "spd_lsp.cli", "engine", "--socket", str(socket),
                                "--idle-timeout", "0"], env=previous_env(previous, runtime), cwd=previous,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stdout:
        if "listening on" in line:
            break
    else:
        raise RuntimeError(f"the previous engine did not start: {process.stderr.read()}")
    yield process, socket
    process.kill()
    process.wait()


def test_this_front_end_gets_drafts_from_the_previous_engine(previous_engine) -> None:
    process, socket = previous_engine
    loaded = load_remote(Settings(engine=f"unix:{socket}"))
    try:
        shipped = loaded.engine.complete(DecodeRequest(PREFIX, Settings().decode_options()))
        plain = loaded.engine.complete(DecodeRequest(PREFIX, DecodeOptions(verify_rounds=0)))
        assert loaded.engine.failures == 0  # answered, not "no drafts because the engine was gone"
        assert shipped.timings.steps > 0 and plain.drafts  # decoded there
    finally:
        loaded.engine.close()
    assert process.poll() is None


def test_an_experimental_option_the_previous_engine_does_not_know_is_a_clear_error(previous_engine) -> None:
    process, socket = previous_engine
    loaded = load_remote(Settings(engine=f"unix:{socket}"))
    try:
        with pytest.raises(ValueError, match="the engine refused the request: unknown decode options: experimental"):
            loaded.engine.complete(DecodeRequest(PREFIX, DecodeOptions.of(verify_rounds=0, seed=1)))
        after = loaded.engine.complete(DecodeRequest(PREFIX, DecodeOptions(verify_rounds=0)))  # it serves on
        assert after.drafts and loaded.engine.failures == 0
    finally:
        loaded.engine.close()
    assert process.poll() is None


PREVIOUS_CLIENT = textwrap.dedent("""
    import json, sys
    from spd_lsp.api import DecodeOptions, DecodeRequest
    from spd_lsp.remote import protocol
    from spd_lsp.remote.client import Connection
    from spd_lsp.remote.address import parse

    connection = Connection(parse(sys.argv[1]))
    options = DecodeOptions(verify_rounds=0, seed=3)  # every option travels, flat: verify_packed, seed, heal, ...
    _, answer = connection.request(protocol.complete_request(0, DecodeRequest(sys.argv[2], options)))
    print(json.dumps(answer.result(timeout=60)))
""")


def test_the_previous_front_end_gets_drafts_from_this_engine(previous: Path, tmp_path: Path) -> None:
    """It sends every option flat, those retired or moved to `experimental` included: ignored, and named."""
    process, where = start_engine(["--socket", str(tmp_path / "engine.sock"), "--idle-timeout", "0"],
                                  engine_env(tmp_path))
    try:
        done = subprocess.run([sys.executable, "-c", PREVIOUS_CLIENT, where, PREFIX], capture_output=True, text=True,
                              env=previous_env(previous, tmp_path), cwd=previous, timeout=120)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["op"] == "result" and answer["drafts"], answer
        assert {"options.verify_packed", "options.seed", "options.heal"} <= set(answer["ignored"])
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()

