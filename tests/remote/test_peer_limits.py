"""Per-address limits on failed handshakes (issue 24, round 3: one client flooding garbage slowed 16
authenticated clients 2.2x at p95): the limiter alone, then a real TCP engine (tiny model)."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest

from spd_lsp.remote import protocol
from spd_lsp.address import parse
from spd_lsp.remote.client import Connection
from spd_lsp.remote.peers import PeerGuard
from tests.engine_support import engine_env, start_engine

TOKEN = "peer-limit-token-" + "x" * 24


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_address_failing_often_is_closed_at_accept_for_the_backoff_then_let_in() -> None:
    clock = Clock()
    guard = PeerGuard(failures=3, window_s=10, backoff_s=30, clock=clock)
    for _ in range(2):
        guard.failed("10.0.0.1")
    assert not guard.blocked("10.0.0.1")
    clock.now += 11  # out of the window: those two are forgotten
    guard.failed("10.0.0.1")
    assert not guard.blocked("10.0.0.1")
    guard.failed("10.0.0.1")
    guard.failed("10.0.0.1")
    assert guard.blocked("10.0.0.1") and not guard.blocked("10.0.0.2") and not guard.blocked(None)
    clock.now += 29
    assert guard.blocked("10.0.0.1")
    clock.now += 2
    assert not guard.blocked("10.0.0.1")
    assert guard.status() == {"blockedPeers": 0, "closedAtAccept": 2, "backoffs": 1}


def _refused(address, payload: bytes) -> bytes:
    """What the engine answers a connection that sends `payload` (b"" once it closes without a word)."""
    with socket.create_connection((address.host, address.port), timeout=10) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            return sock.recv(4096)
        except OSError:  # reset at accept (ECONNRESET, or ENOTCONN at the shutdown when the reset came first)
            return b""


def _serves_on(client: Connection) -> None:
    """The connection that authenticated before the flood still has its requests answered."""
    _, future = client.request(protocol.complete_request(0, {"prefix": "def f():", "options": {"max_tokens": 3}}))
    assert future.result(timeout=60)["op"] == "result"
    client.close()


@pytest.mark.e2e
def test_a_flooding_address_is_cut_off_while_its_authenticated_connections_serve(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    process, where = start_engine(["--tcp", "0", "--token-file", str(token)], engine_env(tmp_path))
    address = parse(where)
    try:
        client = Connection(address, token=TOKEN)  # authenticated before the flood
        garbage = struct.pack(">I", 8) + b"\xc1" * 8
        answers = [_refused(address, garbage) for _ in range(40)]
        assert answers[0]  # answered bad_frame at first
        assert answers[-1] == b""  # then closed at accept, unread (before: each answered bad_frame)
        _, future = client.request({"op": protocol.STATUS})
        status = future.result(timeout=30)["status"]
        assert status["peers"]["blockedPeers"] == 1 and status["peers"]["closedAtAccept"] >= 10
        _serves_on(client)
    finally:
        process.kill()
        process.wait()


@pytest.mark.e2e
def test_over_tls_a_failed_tls_handshake_counts_and_a_backing_off_address_gets_no_handshake(tmp_path: Path) -> None:
    """Before: asyncio completed the TLS handshake before the engine saw the connection, so a failed one never
    counted and a backing-off address still had every handshake done for it. Now the TLS handshake comes after
    the check, and its failures count."""
    import ssl

    from tests.remote.test_tcp import _self_signed

    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    cert, key = _self_signed(tmp_path)
    process, where = start_engine(["--tcp", "0", "--token-file", str(token), "--certfile", str(cert),
                                   "--keyfile", str(key)], engine_env(tmp_path))
    address = parse(where)
    try:
        client = Connection(address, token=TOKEN, cafile=str(cert))  # authenticated before the flood
        answers = [_refused(address, b"not a TLS client hello\r\n" * 4) for _ in range(30)]
        assert all(answer[:1] != b"\x16" for answer in answers)  # no handshake record (0x16) answered any
        _, future = client.request({"op": protocol.STATUS})
        status = future.result(timeout=30)["status"]
        assert status["peers"]["blockedPeers"] == 1 and status["peers"]["closedAtAccept"] >= 5, status["peers"]
        context = ssl.create_default_context(cafile=str(cert))
        with socket.create_connection((address.host, address.port), timeout=10) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError)):  # closed at accept: no handshake
                context.wrap_socket(raw, server_hostname=address.host)
        _serves_on(client)
    finally:
        process.kill()
        process.wait()
