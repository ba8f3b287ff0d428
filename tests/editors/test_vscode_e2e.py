"""The packaged VS Code extension in a real VS Code, against the real `spd-lsp`.

code-server (VS Code's workbench in headless Chromium, the extension host in
Node) with `editor-integrations/vscode/spd-lsp.vsix` installed and the real
server with the bundled model; a user's keys, and asserts on what the screen's
DOM shows. One VS Code for the module, the tests in order: the model loads once
(~10 s on a 2-core CPU), each request then takes about a second. Each step's
screenshot goes to test-artifacts/vscode/.

Needs `scripts/install-vscode-e2e.sh` (from `make setup`) and the `.vsix` from
`scripts/test-vscode.sh`; `make test` runs both first and sets
SPD_REQUIRE_VSCODE_E2E=1, so there a missing piece fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.keys import Keys

from tests.code_samples import WALK_HEAD
from tests.editors.vscode_driver import REPO, VSCode, missing

SERVER = REPO / ".venv" / "bin" / "spd-lsp"
ARTIFACTS = REPO / "test-artifacts" / "vscode"
PREFIX = WALK_HEAD + "            if name.end"
K = 3

_missing = missing() + ([] if SERVER.exists() else [f"spd-lsp ({SERVER})"])
if _missing and os.environ.get("SPD_REQUIRE_VSCODE_E2E") == "1":
    raise RuntimeError(f"the VS Code end-to-end test cannot run: missing {', '.join(_missing)}")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.skipif(bool(_missing), reason=f"missing {', '.join(_missing)} (scripts/install-vscode-e2e.sh, scripts/test-vscode.sh)"),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    (root / ".git").mkdir()
    (root / "walk.py").write_text(PREFIX)  # no newline at the end: Ctrl+End lands after `name.end`
    return root


@pytest.fixture(scope="module")
def code(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VSCode]:
    settings = {
        "spd.serverPath": str(SERVER),
        "spd.engine": "in-process",  # no shared engine process outliving the test
        "spd.device": "cpu",  # what the status item is asserted to show, on any machine
        "spd.k": K,
        "spd.maxTokens": 8,
        "spd.multiline": "auto",  # multi-line drafts where a block starts (the last test); one line elsewhere
        "spd.ngrams.db": str(tmp_path_factory.mktemp("store")),
    }
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # this run's screenshots only
    session = VSCode(
        workspace, settings, home=tmp_path_factory.mktemp("vscode"), artifacts=ARTIFACTS,
        env={"PYTHONPATH": str(REPO)},  # the server imports this checkout, as the other e2e tests do
    )
    try:
        # Inline completions are asked for only once the client has registered its provider,
        # which it does when the server answers `initialize`: type before that and nothing asks.
        # From then on the item shows what the server pushes: loading the model, warming up, ready.
        session.wait_for(lambda: re.search(r"SPD (loading|warming up)", session.status_item("SPD")) or session.status_icon("SPD") == "sparkle",
                         "the server to be running", timeout=60)
        session.open("walk.py")
        yield session
    finally:
        session.close()


def saved_lines(code: VSCode, workspace: Path) -> list[str]:
    """Saves the editor (Ctrl+S) and reads the file: the document itself, without ghost text."""
    before = (workspace / "walk.py").stat().st_mtime_ns
    code.chord(Keys.CONTROL, key="s")
    code.wait_for(lambda: (workspace / "walk.py").stat().st_mtime_ns != before, "the file to be saved")
    return (workspace / "walk.py").read_text().split("\n")


def cycle(code: VSCode, first: str, count: int) -> list[str]:
    """The drafts `Alt+]` shows after `first`, until it comes back to `first` (at most `count` + 1 presses)."""
    drafts = [first]
    for _ in range(count):
        code.chord(Keys.ALT, key="]")
        shown = code.wait_ghost(unlike=drafts[-1])
        if shown == first:
            return drafts
        drafts.append(shown)
    raise AssertionError(f"Alt+] did not come back to the first draft after {count} presses: {drafts}")


def test_the_status_item_says_ready_once_the_opened_file_is_warm_with_no_latency_figure_yet(code: VSCode) -> None:
    # Opening walk.py prefilled its prompt while idle: the server's first model call, after which it pushes
    # "ready". No completion ran yet, so the item names the model and device, and no latency.
    item = code.wait_for(lambda: code.status_icon("SPD") == "sparkle" and code.status_item("SPD"), "ready", timeout=150)
    assert re.fullmatch(r"SPD SmolLM2\S* · cpu", item), item
    code.screenshot("00-ready")


def test_ghost_text_appears_as_you_type(code: VSCode) -> None:
    code.chord(Keys.CONTROL, key=Keys.END)
    code.keys("s")  # `name.ends`: a change, so VS Code asks for inline completions
    ghost = code.wait_ghost(timeout=150)  # the first request loads the model
    assert ghost.strip(), ghost
    code.screenshot("01-ghost-text")


def test_alt_bracket_cycles_through_the_k_drafts(code: VSCode) -> None:
    first = code.wait_ghost()
    drafts = cycle(code, first, K)
    assert len(drafts) == K and len(set(drafts)) == K, drafts
    code.screenshot("02-cycled-back-to-draft-1")


def test_tab_inserts_exactly_the_shown_draft(code: VSCode, workspace: Path) -> None:
    first = code.wait_ghost()
    code.chord(Keys.ALT, key="]")
    second = code.wait_ghost(unlike=first)
    code.screenshot("03-draft-2")
    code.keys(Keys.TAB)
    # Gone, or replaced by the next request's drafts (the server may offer a continuation at once).
    code.wait_for(lambda: code.ghost() != second, "the draft to be inserted")
    lines = saved_lines(code, workspace)
    assert lines[-1] == PREFIX.split("\n")[-1] + "s" + second, (lines[-1], second)
    code.screenshot("04-accepted")


def test_status_item_names_the_model_and_device(code: VSCode) -> None:
    item = code.wait_for(lambda: (text := code.status_item("SPD")) and "cpu" in text and text, "the model in the status item")
    assert re.search(r"SPD SmolLM2\S* · cpu \d+ ms", item), item


def test_ctrl_right_accepts_a_word_and_the_server_counts_a_partial_accept(code: VSCode, workspace: Path) -> None:
    typed = "paths.append(os.path.jo"
    code.keys(Keys.ENTER, typed)
    ghost = code.wait_ghost(timeout=60)
    code.chord(Keys.CONTROL, key=Keys.ARROW_RIGHT)
    code.wait_for(lambda: code.ghost() != ghost, "a word of the draft accepted")
    line = saved_lines(code, workspace)[-1]
    taken = line[line.index(typed) + len(typed):].removesuffix(")")  # the ")" VS Code auto-closed after `append(`
    assert taken and ghost.startswith(taken) and taken != ghost, (line, ghost)
    code.screenshot("04b-accepted-a-word")


def test_show_status_reports_the_shown_accepted_and_partly_accepted_drafts(code: VSCode) -> None:
    code.command("SPD: Show Status")
    # The server's summary in the SPD output channel: the model, the draft Tab accepted (rank 2) reported by
    # the item's `spd.accept` command against the drafts shown (didShowCompletion: the first of each answer,
    # and the one Alt+] lands on), and the word Ctrl+Right took (didPartiallyAcceptCompletion).
    text = code.wait_for(lambda: (text := code.output_text()) and "State:" in text and text, "the status in the output channel", timeout=20)
    assert re.search(r"Model: +SmolLM2\S* on cpu", text), text
    assert re.search(r"Drafts: +accepted/shown by rank: .*#1 0/\d+.*#2 1/\d+", text, re.DOTALL), text  # a long line wraps
    assert re.search(r"#1 0/\d+ \(0%\)\s+\+1\s+partly", text), text
    assert re.search(r"State: +ready", text), text
    code.screenshot("05-show-status")


def test_the_status_item_menu_turns_completions_off_snoozes_them_and_turns_them_on(code: VSCode) -> None:
    code.keys(Keys.ESCAPE)
    code.pick("SPD", "Turn completions off")
    code.wait_for(lambda: code.status_item("SPD") == "SPD off", "the item to say off")
    code.open("walk.py")
    code.chord(Keys.CONTROL, key=Keys.END)
    code.keys(Keys.ENTER, "            paths.app")
    code.screenshot("05b-off")
    with pytest.raises(AssertionError):
        code.wait_ghost(timeout=8)  # off: no request, no ghost
    code.pick("SPD", "Snooze for 5 minutes")
    code.wait_for(lambda: code.status_item("SPD") == "SPD snoozed 5m", "the item to say snoozed")
    code.screenshot("05c-snoozed")
    code.pick("SPD", "Turn completions on")
    code.wait_for(lambda: code.status_icon("SPD") == "sparkle", "the item to be back")
    code.open("walk.py")
    code.chord(Keys.CONTROL, key=Keys.END)
    code.keys("e")
    assert code.wait_ghost(timeout=60).strip()


def test_spd_enable_turns_a_language_off(code: VSCode, workspace: Path) -> None:
    code.keys(Keys.ESCAPE)
    (workspace / ".vscode").mkdir(exist_ok=True)
    (workspace / ".vscode" / "settings.json").write_text(json.dumps({"spd.enable": {"*": True, "python": False}}))
    code.wait_for(lambda: code.status_item("SPD") == "SPD off for python", "the item to say python is off")
    code.open("walk.py")
    code.chord(Keys.CONTROL, key=Keys.END)
    code.keys("x")
    with pytest.raises(AssertionError):
        code.wait_ghost(timeout=8)
    code.screenshot("05d-python-off")
    (workspace / ".vscode" / "settings.json").write_text(json.dumps({}))
    code.wait_for(lambda: code.status_icon("SPD") == "sparkle", "python back on")


def test_a_changed_setting_reaches_the_server(code: VSCode, workspace: Path) -> None:
    # The workspace's settings JSON, as a user edits it: k 3 -> 2. The extension sends
    # workspace/didChangeConfiguration; the next request's drafts cycle through two.
    (workspace / ".vscode").mkdir(exist_ok=True)
    (workspace / ".vscode" / "settings.json").write_text(json.dumps({"spd.k": 2}))
    code.wait_for(lambda: code.status_item("SPD") and "·" not in code.status_item("SPD"), "the settings change to be seen")
    code.open("walk.py")
    code.chord(Keys.CONTROL, key=Keys.END)
    code.keys(Keys.ENTER, "paths.app")
    first = code.wait_ghost(timeout=60)
    drafts = cycle(code, first, 3)
    assert len(drafts) == 2, drafts
    code.screenshot("06-k-2")


def test_restart_server_after_a_kill_brings_drafts_back(code: VSCode) -> None:
    code.keys(Keys.ESCAPE)
    [server] = code.server_processes()
    server.kill()
    server.wait(10)
    # The client restarts a crashed server by itself (a few times); let that settle, so
    # what follows is the command's doing.
    code.wait_for(lambda: [p for p in code.server_processes() if p.pid != server.pid], "the crash handler's restart", timeout=20)
    before = {p.pid for p in code.server_processes()} | {server.pid}
    code.command("SPD: Restart Server")
    code.wait_for(lambda: [p for p in code.server_processes() if p.pid not in before], "the restarted server process", timeout=20)
    # The new client shows a spinner from its launch until the server answers `initialize`.
    code.wait_for(lambda: code.status_icon("SPD") == "sparkle", "the restarted server to be running", timeout=60)
    # The replaced server is asked to shut down and exit; on a loaded machine that takes a few seconds, but it
    # must go: a restart never leaves two servers (CI saw both alive at this point, 2 s apart in age).
    code.wait_for(lambda: len(code.server_processes()) == 1, "the replaced server to exit", timeout=30)
    code.keys("e")
    ghost = code.wait_ghost(timeout=120)
    assert ghost.strip(), ghost
    code.screenshot("07-after-restart")


def test_multiline_auto_offers_a_block_body_after_its_header_and_tab_inserts_it(code: VSCode, workspace: Path) -> None:
    code.wait_for(lambda: code.status_icon("SPD") == "sparkle", "the server to be ready", timeout=150)
    code.open("walk.py")
    code.chord(Keys.CONTROL, key=Keys.END)
    code.keys(Keys.ENTER, Keys.ENTER)
    code.chord(Keys.SHIFT, key=Keys.TAB)  # out of the function body, whatever the editor indented
    code.chord(Keys.SHIFT, key=Keys.TAB)
    code.keys("def total_of(values):")
    code.wait_for(lambda: len(code.ghost_lines()) >= 1, "a draft over several lines", timeout=120)
    code.screenshot("08-multiline-auto")
    before = len(saved_lines(code, workspace))
    code.keys(Keys.TAB)
    lines = code.wait_for(lambda: len(ls := saved_lines(code, workspace)) > before and ls, "the body inserted")
    header = max(i for i, line in enumerate(lines) if line.strip() == "def total_of(values):")
    indent = len(lines[header]) - len(lines[header].lstrip())
    assert lines[header + 1].strip() and len(lines[header + 1]) - len(lines[header + 1].lstrip()) > indent, lines[header:]
