"""The prompt's stable context (snippets, header) in the engine's cache before the request comes.

Real tiny engine and runner with the SmolLM2-style `<file_sep>` tokenizer, so snippets and the
path come before the prefix; assertions are on the prefill token counts the engine reports.
"""

from __future__ import annotations

from spd_lsp.api import DecodeRequest, Loaded
import time
from pathlib import Path
from typing import Any

import pytest

from spd_lsp.settings import parse_settings
from spd_lsp.session.session import Session
from tests.engine.test_prompt_formats import family_engine
from tests.session.test_server_session import RecordingClient

HELPERS = "def compute_total(items):\n    return sum(item.price * item.count for item in items)\n"
MAIN = "items = load_items()\nvalue = compute_total(items)\nprint(value)\nother = compute_"


def wait_for(predicate: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "helpers.py").write_text(HELPERS)
    return tmp_path


def context_session(roots: list[Path], context: dict[str, Any]) -> Session:
    engine = family_engine("file_sep")
    session = Session(RecordingClient(), loader=lambda settings: Loaded(engine, {"name": "tiny"}, "cpu"),
                      anticipate=False)
    settings = parse_settings({"ngrams": {"enabled": False}, "context": context})[0]
    session.configure(settings, roots=roots).future.result(60)
    return session


def end_of(text: str) -> tuple[int, int]:
    return text.count("\n"), len(text) - text.rfind("\n") - 1


def test_a_warm_up_prefills_the_snippets_the_request_then_reuses(workspace: Path) -> None:
    """Issue 13, item 3: `warm_up` prefilled the prefix alone, so the first request with snippets
    on ran the whole prompt again (the snippets come first)."""
    session = context_session([workspace], {"snippets": True, "sources": ["workspace"]})
    try:
        wait_for(lambda: session.context.workspace.index is not None)
        uri = (workspace / "main.py").as_uri()
        line, character = end_of(MAIN)
        session.warm_up(uri, MAIN, line=line, character=character).future.result(60)
        answer = session.complete(uri, MAIN, line, character, "utf-16").future.result(60)
        last = session.status()["last"]
        assert [s["path"] for s in last["prompt"]["snippets"]] == ["helpers.py"]
        assert answer.timings.reused_tokens > last["prompt"]["snippets"][0]["tokens"]
        assert answer.timings.prefill_tokens <= 3
    finally:
        session.close()


def test_a_warm_up_prefills_the_file_header(workspace: Path) -> None:
    session = context_session([workspace], {"header": True})
    try:
        uri = (workspace / "main.py").as_uri()
        session.warm_up(uri, MAIN).future.result(60)  # opened: the request comes at its end
        line, character = end_of(MAIN)
        answer = session.complete(uri, MAIN, line, character, "utf-16").future.result(60)
        assert session.status()["last"]["prompt"]["headerTokens"] > 1
        assert answer.timings.prefill_tokens <= 3
    finally:
        session.close()


def test_a_changed_snippet_set_is_prefilled_while_idle(workspace: Path) -> None:
    """A file saved with code the cursor's text needs: the index follows it, and the prompt with
    the new snippet set is prefilled before the user's next keystroke asks for it."""
    session = context_session([workspace], {"snippets": True, "sources": ["workspace"]})
    engine = session._loaded.engine
    warmed: list[list[str]] = []
    warm = engine.warm

    def spy(request: DecodeRequest, cancelled: Any = None) -> int:
        ran = warm(request, cancelled)
        warmed.append([path for path, _ in request.context.snippets])
        return ran

    engine.warm = spy
    try:
        wait_for(lambda: session.context.workspace.index is not None)
        uri = (workspace / "main.py").as_uri()
        line, character = end_of(MAIN)
        session.complete(uri, MAIN, line, character, "utf-16").future.result(60)
        assert [s["path"] for s in session.status()["last"]["prompt"]["snippets"]] == ["helpers.py"]
        (workspace / "loading.py").write_text("def load_items():\n    return [Item(n) for n in range(3)]\n")
        session.saved(workspace / "loading.py")
        wait_for(lambda: any("loading.py" in paths for paths in warmed))
        typed = MAIN + "t"
        answer = session.complete(uri, typed, line, character + 1, "utf-16").future.result(60)
        assert "loading.py" in [s["path"] for s in session.status()["last"]["prompt"]["snippets"]]
        assert answer.timings.prefill_tokens <= 3
    finally:
        session.close()


def test_an_edit_drops_the_pending_warm_up() -> None:
    from tests.session.test_server_session import FakeEngine, make_session

    engine = FakeEngine(["x"])
    session, _ = make_session(engine)
    try:
        session.scheduler.submit("busy", lambda cancelled: time.sleep(0.3))  # the model is busy
        warming = session.warm_up("doc", "value = 1\nother = ")
        session.edited()
        assert warming.future.cancelled() and engine.warmed == []
    finally:
        session.close()


def test_a_verified_request_leaves_a_cache_without_autograd_history() -> None:
    """Verification ran its forward in grad mode: the shared cache's tensors then needed grad, and
    the next region's copy of it (a changed snippet set in front of the same prefix) raised
    "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol"."""
    from spd_lsp.api import DecodeOptions

    engine = family_engine("file_sep")
    options = DecodeOptions(k=2, max_tokens=3)
    assert options.verify_rounds > 0
    engine.complete(DecodeRequest("items = load()\n" * 10, options))
    assert not any(t.requires_grad for layer in engine.runner.cache.layers for t in (layer.keys, layer.values))


def test_turning_workspace_snippets_off_drops_their_index_and_watcher(workspace: Path) -> None:
    session = context_session([workspace], {"snippets": True, "sources": ["workspace"]})
    try:
        chunks = session.context.workspace
        wait_for(lambda: chunks.index is not None)
        session.configure(parse_settings({"ngrams": {"enabled": False}})[0], roots=[workspace]).future.result(60)
        assert session.context.workspace is None
        wait_for(lambda: chunks._watcher is None)
    finally:
        session.close()
