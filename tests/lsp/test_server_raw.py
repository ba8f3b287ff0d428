"""The server over raw JSON-RPC frames: transport flags, a clean stdout, malformed params."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest
from bench.isolation import isolated_env as server_env

pytestmark = pytest.mark.e2e


def frame(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frame(stream: IO[bytes]) -> dict[str, Any]:
    """One framed message; fails on anything that is not a header (a stray print would)."""
    length = None
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("ascii").partition(":")
        assert name in ("Content-Length", "Content-Type"), line
        if name == "Content-Length":
            length = int(value)
    assert length is not None, "stream closed"
    return json.loads(stream.read(length))


class RawServer:
    """A server subprocess; a thread reads its frames, so a deaf server fails a test instead of hanging it."""

    def __init__(self, *args: str, env: dict[str, str], module: str = "spd_lsp.cli") -> None:
        command = [sys.executable, "-m", module, *args]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                self.frames.put(read_frame(self.process.stdout))
        except (AssertionError, ValueError, OSError):
            self.frames.put(None)  # the stream ended (or broke)

    def send(self, message: dict[str, Any]) -> None:
        self.write(frame(message))

    def write(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def response(self, msg_id: Any, timeout: float = 60.0) -> dict[str, Any]:
        """The next response (notifications and server requests are kept aside); it must be `msg_id`'s."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.frames.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer to {msg_id!r} in {timeout} s") from None
            assert message is not None, f"the stream ended before the answer to {msg_id!r}"
            if "id" in message and not message.get("method"):
                assert message["id"] == msg_id, message
                return message
            self.notifications.append(message)

    def close(self) -> int:
        self.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
        self.response("bye")
        self.send({"jsonrpc": "2.0", "method": "exit"})
        return self.process.wait(20)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    raw = RawServer("--clientProcessId=42", env=server_env(tmp_path_factory.mktemp("raw")))
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"capabilities": {}, "initializationOptions": {"engine": "in-process", "model": "/nowhere/none.gguf"}},
        }
    )
    assert "capabilities" in raw.response(0)["result"]
    raw.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    yield raw
    assert raw.close() == 0


DOC = {"uri": "file:///virtual/raw.py"}


@pytest.mark.parametrize(
    "params",
    [
        None,
        [1, 2],
        {"textDocument": DOC, "position": "here", "context": {"triggerKind": 1}},
        {"textDocument": DOC, "position": {"line": -1, "character": 0}, "context": {"triggerKind": 1}},
        {"textDocument": DOC, "position": {"line": 0, "character": 2**31}, "context": {"triggerKind": 1}},
    ],
)
def test_malformed_params_are_answered_with_invalid_params(server: RawServer, params: Any) -> None:
    msg_id = f"bad-{time.monotonic_ns()}"
    server.send({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/inlineCompletion", "params": params})
    assert server.response(msg_id)["error"]["code"] == -32602


def test_missing_model_answers_empty_lists(server: RawServer) -> None:
    server.send(
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {"textDocument": {**DOC, "languageId": "python", "version": 1, "text": "x = "}},
        }
    )
    server.send(
        {
            "jsonrpc": "2.0",
            "id": "ok",
            "method": "textDocument/inlineCompletion",
            "params": {"textDocument": DOC, "position": {"line": 0, "character": 4}, "context": {"triggerKind": 2}},
        }
    )
    assert server.response("ok")["result"] == {"items": []}
    server.send(
        {"jsonrpc": "2.0", "id": "st", "method": "workspace/executeCommand", "params": {"command": "spd.status"}}
    )
    assert "none.gguf" in server.response("st")["result"]["error"]


def test_version_and_stdout_is_protocol_only(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "spd_lsp.cli", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("spd-lsp ")
    log_file = tmp_path / "state" / "nvim" / "spd-lsp.log"  # a log folder that does not exist yet
    raw = RawServer("--stdio", "--log-file", str(log_file), "--log-level", "DEBUG", env=server_env(tmp_path))
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"capabilities": {}, "initializationOptions": {"engine": "in-process", "model": "/nowhere.gguf"}},
        }
    )
    assert raw.response(1)["result"]["serverInfo"]["name"] == "spd-lsp"
    assert raw.close() == 0
    assert "initialize" in log_file.read_text()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"capabilities": {}, "initializationOptions": {"engine": "in-process", "model": "/nowhere.gguf"}},
}


STATUS_PARAMS = {"command": "spd.status"}


@pytest.mark.parametrize(
    "message, expected",
    [
        ({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration",
          "params": {"settings": {"spd": {"engine": "in-process", "model": "/nowhere/none.gguf"}}}}, "result"),
        ({"method": "workspace/executeCommand", "params": STATUS_PARAMS}, -32600),  # no "jsonrpc"
        ({"jsonrpc": "1.0", "method": "workspace/executeCommand", "params": STATUS_PARAMS}, -32600),
        ({"jsonrpc": "2.0", "method": "workspace/executeCommand", "params": {"command": "spd.nothing"}}, -32601),
        ({"jsonrpc": "2.0", "method": "textDocument/inlineCompletion",
          "params": {"textDocument": DOC, "position": {"line": 1.5, "character": 0}, "context": {"triggerKind": 1}}},
         -32602),
        ({"jsonrpc": "2.0", "method": "textDocument/inlineCompletion",
          "params": {"textDocument": DOC, "position": {"line": "3", "character": 0}, "context": {"triggerKind": 1}}},
         -32602),
    ],
    ids=["notification-with-id", "no-jsonrpc", "jsonrpc-1.0", "unknown-command", "line-1.5", "line-string"],
)
def test_every_request_is_answered(server: RawServer, message: dict[str, Any], expected: Any) -> None:
    msg_id = f"req-{time.monotonic_ns()}"
    server.send({**message, "id": msg_id})
    answer = server.response(msg_id, timeout=20)
    if expected == "result":
        assert "result" in answer and "error" not in answer, answer
    else:
        assert answer["error"]["code"] == expected, answer


def test_invalid_utf8_is_replaced_and_answered(server: RawServer) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": "utf8", "method": "workspace/executeCommand",
                       "params": {**STATUS_PARAMS, "note": "@@"}}).encode().replace(b"@@", b"\xff\xfe")
    server.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert "requests" in server.response("utf8", timeout=20)["result"]
    server.write(frame([1, 2]))  # a batch: not LSP
    assert server.response(None, timeout=20)["error"]["code"] == -32600


def test_failed_completions_are_counted_and_the_first_of_each_kind_shown(tmp_path: Path) -> None:
    raw = RawServer(env=server_env(tmp_path), module="tests.failing_server")
    raw.send({**INITIALIZE, "params": {"capabilities": {}, "initializationOptions": {"engine": "in-process", "ngrams": {"enabled": False}}}})
    raw.response(1)
    text = {**DOC, "languageId": "python", "version": 1, "text": "value = 1\nx = val"}
    raw.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": text}})
    for msg_id in ("a", "b"):
        position = {"line": 1, "character": 7}
        raw.send({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/inlineCompletion",
                  "params": {"textDocument": DOC, "position": position, "context": {"triggerKind": 2}}})
        assert raw.response(msg_id)["result"] == {"items": []}
    raw.send({"jsonrpc": "2.0", "id": "st", "method": "workspace/executeCommand", "params": STATUS_PARAMS})
    status = raw.response("st")["result"]
    assert status["failed"] == 2 and status["failures"] == {"RuntimeError": 2}
    shown = [n["params"]["message"] for n in raw.notifications if n.get("method") == "window/showMessage"]
    assert len(shown) == 1 and "RuntimeError: decode exploded" in shown[0], shown
    assert raw.close() == 0


def test_shutdown_does_not_block_the_event_loop(tmp_path: Path) -> None:
    """Issue 10, item 9: closing the session (bounded joins, store close) runs off the event loop,
    so a message sent during a slow shutdown is answered first instead of waiting behind it."""
    raw = RawServer(env=server_env(tmp_path), module="tests.slow_close_server")
    raw.send({**INITIALIZE, "params": {"capabilities": {}, "initializationOptions": {"engine": "in-process", "ngrams": {"enabled": False}}}})
    raw.response(1)
    raw.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    raw.send({"jsonrpc": "2.0", "id": "down", "method": "shutdown"})
    raw.send({"jsonrpc": "2.0", "id": "st", "method": "workspace/executeCommand", "params": STATUS_PARAMS})
    raw.response("st", timeout=30)  # the next answer must be this one: the session is still closing
    assert raw.response("down", timeout=30)["result"] is None
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    assert raw.process.wait(20) == 0


def test_deeply_nested_json_is_answered_and_the_server_keeps_serving(server: RawServer) -> None:
    """Issue 24, item 1: 50,000 nested `[` (a correct Content-Length) made json.loads raise
    RecursionError, uncaught: `spd-lsp --stdio` exited 1."""
    body = b"[" * 50_000
    server.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert server.response(None, timeout=20)["error"]["code"] == -32700  # no id can be known
    nested = json.dumps({"jsonrpc": "2.0", "id": "deep", "method": "workspace/executeCommand",
                         "params": {**STATUS_PARAMS, "arguments": "@@"}}).encode()
    server.write(frame_bytes(nested.replace(b'"@@"', b"[" * 500 + b"]" * 500)))
    assert server.response("deep", timeout=20)["error"]["code"] == -32600  # parsed, refused, answered by id
    server.send({"jsonrpc": "2.0", "id": "after", "method": "workspace/executeCommand", "params": STATUS_PARAMS})
    assert "requests" in server.response("after", timeout=20)["result"]
    assert server.process.poll() is None


def frame_bytes(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_an_integer_past_pythons_digit_limit_is_still_answered_by_id(server: RawServer) -> None:
    """Fuzzer finding (issue 24): int() refuses > 4300 digits, so the whole body read as "not JSON"
    and the request was answered -32700 with id null: its client waited forever."""
    body = json.dumps({"jsonrpc": "2.0", "id": "big", "method": "workspace/executeCommand",
                       "params": {**STATUS_PARAMS, "arguments": ["@@"]}}).encode().replace(b'"@@"', b"9" * 5000)
    server.write(frame_bytes(body))
    assert "requests" in server.response("big", timeout=20)["result"]
