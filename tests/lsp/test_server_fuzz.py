"""A grammar-based fuzzer of JSON-RPC bodies against a real `spd-lsp --stdio` subprocess that
decodes through a real engine (`engine: "auto"`, the tiny test model).

Bodies are valid envelopes of initialize / didOpen / didChange / inlineCompletion /
executeCommand / didChangeConfiguration / cancelRequest whose every field may be hostile
(wrong types, huge numbers, lone surrogates), plus random JSON, deep nesting and bad UTF-8
spliced into the bytes. After each batch: every request with a usable id was answered, a
normal request is answered, and the server never exited.

Fixed budget: `max_examples`, derandomized, no deadline (issue 24, item 1).
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bench.isolation import isolated_env
from tests.engine_support import LOADER
from tests.lsp.test_server_raw import RawServer

pytestmark = pytest.mark.e2e
ANSWER_S = 30.0
DEEP = "\x00deep"  # placeholders spliced into the bytes after json.dumps
BAD_UTF8 = "\x00utf8"
HUGE_NUMBER = "\x00huge"
URI = "file:///virtual/fuzz.py"
METHODS = ["initialize", "textDocument/didOpen", "textDocument/didChange", "textDocument/inlineCompletion",
           "textDocument/completion", "workspace/executeCommand", "workspace/didChangeConfiguration",
           "$/cancelRequest", "textDocument/didClose", "textDocument/didSave", "spd/nothing"]
COMMANDS = ["spd.status", "spd.accepted", "spd.rejected", "spd.reindex", "spd.nothing"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    runtime = Path(f"/tmp/spd-fz-{os.getpid()}")  # short: socket paths have 107 bytes
    runtime.mkdir(mode=0o700, exist_ok=True)
    workspace = tmp_path_factory.mktemp("fuzz-ws")
    (workspace / "widgets.py").write_text("def frobnicate_widget(count):\n    return count * 42\n")
    env = {**isolated_env(tmp_path_factory.mktemp("fuzz")), "SPD_LSP_ENGINE_LOADER": LOADER,
           "XDG_RUNTIME_DIR": str(runtime)}
    raw = RawServer("--stdio", env=env)
    raw.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "capabilities": {}, "rootUri": workspace.as_uri(),
        "initializationOptions": {"engine": "auto", "k": 3, "maxTokens": 6}}})
    assert "capabilities" in raw.response(0)["result"]
    raw.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    raw.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": URI, "languageId": "python", "version": 1, "text": "def add(a, b):\n    return a"}}})
    yield raw
    raw.send({"jsonrpc": "2.0", "id": "pid", "method": "workspace/executeCommand", "params": {"command": "spd.status"}})
    engine_pid = ((raw.response("pid", timeout=ANSWER_S)["result"] or {}).get("model") or {}).get("pid")
    assert raw.close() == 0
    if engine_pid:
        os.kill(engine_pid, 15)
    shutil.rmtree(runtime, ignore_errors=True)


HUGE = st.sampled_from([2**31, 2**63, -(2**63) - 1, 10**30, HUGE_NUMBER])
TEXT = st.text(max_size=40) | st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1,
                                       max_size=3) | st.sampled_from([DEEP, BAD_UTF8, "", "\x00", "\r\n\r\n"])
SCALARS = st.none() | st.booleans() | st.integers(-3, 200) | HUGE | st.floats(allow_nan=False) | TEXT
ANY = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=6), inner, max_size=3), max_leaves=8)


def field(valid: st.SearchStrategy) -> st.SearchStrategy:
    return valid | ANY


NUMBER = field(st.integers(0, 5))
POSITION = field(st.fixed_dictionaries({"line": NUMBER, "character": NUMBER}))
RANGE = field(st.fixed_dictionaries({"start": POSITION, "end": POSITION}))
DOCUMENT = field(st.fixed_dictionaries({"uri": field(st.sampled_from([URI, "file:///virtual/other.py", "untitled:1"]))},
                                       optional={"version": NUMBER, "languageId": field(st.just("python")),
                                                 "text": field(TEXT)}))
SETTINGS = field(st.fixed_dictionaries({}, optional={
    name: ANY for name in ["k", "maxTokens", "engine", "model", "ngrams", "context", "temperature", "method"]}))
PARAMS = {
    "initialize": st.fixed_dictionaries({}, optional={"capabilities": ANY, "rootUri": ANY,
                                                      "initializationOptions": SETTINGS}),
    "textDocument/didOpen": st.fixed_dictionaries({"textDocument": DOCUMENT}),
    "textDocument/didChange": st.fixed_dictionaries({"textDocument": DOCUMENT, "contentChanges": field(st.lists(
        field(st.fixed_dictionaries({"text": field(TEXT)}, optional={"range": RANGE})), max_size=3))}),
    "textDocument/inlineCompletion": st.fixed_dictionaries({"textDocument": DOCUMENT, "position": POSITION},
                                                           optional={"context": field(st.fixed_dictionaries(
                                                               {"triggerKind": field(st.sampled_from([1, 2]))}))}),
    "textDocument/completion": st.fixed_dictionaries({"textDocument": DOCUMENT, "position": POSITION}),
    "workspace/executeCommand": st.fixed_dictionaries({"command": field(st.sampled_from(COMMANDS))},
                                                      optional={"arguments": ANY}),
    "workspace/didChangeConfiguration": st.fixed_dictionaries({"settings": field(st.fixed_dictionaries(
        {"spd": SETTINGS}))}),
    "$/cancelRequest": st.fixed_dictionaries({"id": ANY}),
}
ID = st.sampled_from(["int", "str"]) | st.sampled_from([None, True, 1.5, [1], {"a": 1}, 10**30, -1])


@st.composite
def messages(draw: Any) -> tuple[bytes, Any]:
    """One body and the id it is owed an answer to (None when it is owed none)."""
    kind = draw(st.sampled_from(["envelope"] * 6 + ["notification", "random", "batch"]))
    if kind == "random":
        return _splice(json.dumps(draw(ANY))), None
    if kind == "batch":
        return _splice(json.dumps(draw(st.lists(ANY, max_size=3)))), None
    method = draw(st.sampled_from(METHODS))
    message: dict[str, Any] = {"jsonrpc": draw(field(st.just("2.0"))) if draw(st.booleans()) else "2.0",
                               "method": method}
    if draw(st.booleans()):
        message["params"] = draw(field(PARAMS.get(method, ANY)))
    owed = None
    if kind == "envelope":
        msg_id = draw(ID)
        if msg_id in ("int", "str"):
            msg_id = next(COUNTER) if msg_id == "int" else f"fz-{next(COUNTER)}"
            owed = msg_id if message["jsonrpc"] == "2.0" else None
        message["id"] = msg_id
    body = _splice(json.dumps(message))
    if any(mark.encode() in body for mark in ("\\u0000deep", "\\u0000utf8")):
        owed = None  # refused as a whole (too deep, or the id may be unreadable); answered with id null
    return body, owed


COUNTER = itertools.count(1000)


def _splice(text: str) -> bytes:
    depth = 100_000 if len(text) % 2 else 150
    return (text.encode().replace(b'"\\u0000deep"', b"[" * depth + b"]" * depth)
            .replace(b"\\u0000utf8", b"\xff\xfe\xed\xa0\x80").replace(b'"\\u0000huge"', b"1" + b"0" * 5000))


def _answered(raw: RawServer, wanted: set[Any]) -> set[Any]:
    """The ids answered until every one of `wanted` was, or ANSWER_S passed; the stream must not end."""
    seen: set[Any] = set()
    deadline = time.monotonic() + ANSWER_S
    while wanted - seen:
        try:
            message = raw.frames.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        assert message is not None, "the server's stream ended"
        if "method" not in message and isinstance(message.get("id"), (int, str)):
            seen.add(message["id"])
    return seen


@settings(max_examples=60, deadline=None, derandomize=True, database=None, phases=(Phase.generate,),  # no shrinking:
          # through a subprocess it takes minutes; the failure message shows the bodies
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(batch=st.lists(messages(), min_size=1, max_size=5))
def test_server_answers_hostile_bodies_and_keeps_serving(server: RawServer, batch: list[tuple[bytes, Any]]) -> None:
    owed = set()
    for body, msg_id in batch:
        server.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        if msg_id is not None:
            owed.add(msg_id)
    check = f"check-{next(COUNTER)}"
    server.send({"jsonrpc": "2.0", "id": check, "method": "workspace/executeCommand",
                 "params": {"command": "spd.status"}})
    answered = _answered(server, owed | {check})  # answers may follow the check (a completion waits for the engine)
    assert check in answered, f"no answer to a status request in {ANSWER_S} s"
    late = owed - answered
    assert not late, f"requests never answered: {late} in {[body[:300] for body, _ in batch]}"
    assert server.process.poll() is None, "the server exited"
