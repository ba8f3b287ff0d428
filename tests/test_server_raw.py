"""The server over raw JSON-RPC frames: transport flags, a clean stdout, malformed params."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest
from test_server_e2e import server_env

pytestmark = pytest.mark.e2e


def frame(message: dict[str, Any]) -> bytes:
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
    def __init__(self, *args: str, env: dict[str, str]) -> None:
        command = [sys.executable, "-m", "spd_lsp.cli", *args]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def send(self, message: dict[str, Any]) -> None:
        self.process.stdin.write(frame(message))
        self.process.stdin.flush()

    def response(self, msg_id: Any) -> dict[str, Any]:
        while "id" not in (message := read_frame(self.process.stdout)) or message.get("method"):
            pass  # notifications and server requests
        assert message["id"] == msg_id, message
        return message

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
            "params": {"capabilities": {}, "initializationOptions": {"model": "/nowhere/none.gguf"}},
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
    log_file = tmp_path / "server.log"
    raw = RawServer("--stdio", "--log-file", str(log_file), "--log-level", "DEBUG", env=server_env(tmp_path))
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"capabilities": {}, "initializationOptions": {"model": "/nowhere.gguf"}},
        }
    )
    assert raw.response(1)["result"]["serverInfo"]["name"] == "spd-lsp"
    assert raw.close() == 0
    assert "initialize" in log_file.read_text()


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on `port`, from /proc/net/tcp{,6} (hex)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, _, hex_port = local.partition(":")
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                found.add(address)
    return found


def test_tcp_serves_loopback(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "spd_lsp.cli", "--tcp", "--port", str(port)], env=server_env(tmp_path)
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                connection = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.1)
        with connection, connection.makefile("rwb") as stream:
            stream.write(
                frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {"capabilities": {}, "initializationOptions": {"model": "/nowhere.gguf"}},
                    }
                )
            )
            stream.flush()
            assert "capabilities" in read_frame(stream)["result"]
            assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
    finally:
        process.kill()
        process.wait(10)
