"""Hostile LSP framing, each case against a fresh server subprocess: it must answer, resynchronise, never die."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench.isolation import isolated_env as server_env
from tests.lsp.test_server_raw import RawServer, frame

pytestmark = pytest.mark.e2e


def status(msg_id: str, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "workspace/executeCommand", "params": {"command": "spd.status"},
            **extra}


def body(msg_id: str) -> bytes:
    """A request with non-ASCII text: 10 characters that are 20 UTF-8 bytes."""
    return json.dumps(status(msg_id, note="é" * 10), ensure_ascii=False).encode()


HOSTILE = body("hostile")
SIZE = len(HOSTILE)


@pytest.mark.parametrize(
    "data, answered",
    [
        (b"content-length: %d\r\n\r\n" % SIZE + HOSTILE, True),
        (b"CONTENT-LENGTH:%d\r\n\r\n" % SIZE + HOSTILE, True),
        (b"Content-Length: %d\n\n" % SIZE + HOSTILE, True),
        (b"Content-Length: %d\r\n\r\n" % (SIZE - 10) + HOSTILE, True),  # a client counting characters
        (b"Content-Length: %d\r\n\r\n" % (SIZE + 10) + HOSTILE, True),  # and nothing follows until the probe
        (b"Content-Length: -5\r\n\r\n" + HOSTILE, True),
        (b"Content-Length: twelve\r\n\r\n" + HOSTILE, True),
        (b"Content-Type: application/json\r\n\r\n" + HOSTILE, True),  # no length at all
        (HOSTILE, True),  # no header at all
        (b"garbage line\r\nContent-Length: %d\r\n\r\n" % SIZE + HOSTILE, True),
        (b"Content-Length: %d\r\n\r\n" % SIZE + b"{not json at all" + b" " * (SIZE - 16), False),
        (b"Content-Length: 100000000000000\r\n\r\n", False),  # MemoryError killed pygls
        (b"Content-Length: 9223372036854775808\r\n\r\n", False),  # OverflowError killed pygls
        (b"Content-Length: 3000000000\r\n\r\n" + HOSTILE, False),  # a lie: the probe's header resynchronises
    ],
    ids=["lowercase", "no-space", "lf-only", "short-by-10", "long-by-10", "negative", "non-numeric", "no-length",
         "no-header", "garbage-line", "not-json", "1e14", "2e63", "3GB"],
)
def test_a_bad_frame_is_survived_and_the_next_request_answered(tmp_path: Path, data: bytes, answered: bool) -> None:
    server = RawServer("--log-level", "WARNING", env=server_env(tmp_path))
    try:
        server.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                     "params": {"capabilities": {}, "initializationOptions": {"engine": "in-process", "model": "/nowhere/none.gguf"}}})
        assert "capabilities" in server.response("init")["result"]
        server.write(data)
        if answered:
            assert "requests" in server.response("hostile", timeout=20)["result"]
        elif data.startswith(b"Content-Length: %d" % SIZE):
            assert server.response(None, timeout=20)["error"]["code"] == -32700
        server.send(status("probe"))
        assert "requests" in server.response("probe", timeout=20)["result"]
        assert server.close() == 0
    finally:
        server.process.kill()
        server.process.wait(10)
