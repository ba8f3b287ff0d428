"""The server's memory under many notifications (issue 46: a typing storm's front end grew 4.5 MB a minute)."""

from __future__ import annotations

from typing import Any

import pytest

from spd_lsp.api import Loaded
from spd_lsp.lsp import transport
from spd_lsp.lsp.handlers import build_server


def no_model(settings: Any) -> Loaded:
    raise RuntimeError("no model in this test")


def test_handled_notifications_leave_no_futures_behind(caplog: pytest.LogCaptureFixture) -> None:
    """pygls 2.1 kept the future of every `didOpen` / `didChange` / `didClose` (generator handlers) for good. Each is
    still checked for its handler's error, once (the fix's first form called itself instead: a RecursionError logged
    per keystroke)."""
    server = build_server(no_model)
    checked = []
    check = server.protocol._check_handler_result
    server.protocol._check_handler_result = lambda future: (checked.append(future), check(future))
    try:
        uri = "file:///storm.py"
        transport.dispatch(server.protocol, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "x = "}}})
        for version in range(2, 202):
            transport.dispatch(server.protocol, {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": 0, "character": version + 2},
                                              "end": {"line": 0, "character": version + 2}}, "text": "1"}]}})
        transport.dispatch(server.protocol, {"jsonrpc": "2.0", "method": "textDocument/didClose",
                                             "params": {"textDocument": {"uri": uri}}})
        assert server.protocol._request_futures == {}
        assert len(checked) == 202 and not [r for r in caplog.records if r.name == "concurrent.futures"]
    finally:
        server.session.close()
