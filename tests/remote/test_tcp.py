"""The team engine over TCP: loopback by default, every connection authenticated, TLS with a
certificate, and no client's garbage (random, malformed or oversized frames) stops it."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spd_lsp.settings import Settings
from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.remote import protocol
from spd_lsp.address import parse
from spd_lsp.remote.client import Connection
from spd_lsp.remote.connect import load_remote
from tests.engine_support import engine_env, start_engine

TOKEN = "team-token-" + "x" * 24
PREFIX = "def add(a, b):\n    return"


def _self_signed(directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("team")
    token = directory / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    cert, key = _self_signed(directory)
    return {"dir": directory, "token": token, "cert": cert, "key": key}


@pytest.fixture(scope="module")
def plain(files: dict[str, Path]):
    # --peer-limit 0: the fuzz rounds fail handshakes from this address, then connect to check the engine
    process, where = start_engine(["--tcp", "0", "--peer-limit", "0", "--token-file", str(files["token"])],
                                  engine_env(files["dir"]))
    yield where
    process.kill()
    process.wait()


@pytest.fixture(scope="module")
def tls(files: dict[str, Path]):
    process, where = start_engine(["--tcp", "0", "--token-file", str(files["token"]), "--certfile",
                                   str(files["cert"]), "--keyfile", str(files["key"])], engine_env(files["dir"]))
    yield where
    process.kill()
    process.wait()


def _raw(where: str) -> socket.socket:
    address = parse(where)
    return socket.create_connection((address.host, address.port), timeout=10)


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionError, socket.timeout):
        return True


def test_binds_loopback_unless_told(plain: str) -> None:
    assert parse(plain).host == "127.0.0.1"


@pytest.mark.parametrize("first", [
    protocol.hello(None), protocol.hello("wrong-token-" + "y" * 20), {"op": "hello", "version": protocol.VERSION, "token": 5},
    protocol.complete_request(1, DecodeRequest(PREFIX)),
])
def test_unauthenticated_gets_an_error_and_is_closed(plain: str, first: dict) -> None:
    with _raw(plain) as sock:
        protocol.send(sock, first)
        answer = protocol.receive(sock)
        assert answer["op"] == "error" and answer["code"] == "unauthorized"
        assert "drafts" not in answer and _closed(sock)


def test_wrong_version_is_refused(plain: str) -> None:
    with _raw(plain) as sock:
        protocol.send(sock, {"op": "hello", "version": 99, "token": TOKEN})
        assert protocol.receive(sock)["code"] == "version" and _closed(sock)


def test_token_admits_and_answers(plain: str) -> None:
    connection = Connection(parse(plain), token=TOKEN)
    _, future = connection.request(protocol.complete_request(0, DecodeRequest(PREFIX, DecodeOptions(max_tokens=4))))
    answer = future.result(timeout=30)
    assert answer["op"] == "result" and len(answer["drafts"]) >= 1
    connection.close()


def test_remote_engine_over_tls_with_document_ngrams(tls: str, files: dict[str, Path], monkeypatch) -> None:
    monkeypatch.setenv("SPD_LSP_TOKEN", TOKEN)
    loaded = load_remote(Settings(engine=tls, engine_certificate=str(files["cert"])))
    result = loaded.engine.complete(DecodeRequest(PREFIX, DecodeOptions(max_tokens=4, stop_at_newline=False)))
    assert result.drafts and result.timings.steps > 0
    loaded.engine.close()


def test_tls_engine_refuses_plain_tcp(tls: str) -> None:
    with _raw(tls) as sock:
        try:
            protocol.send(sock, protocol.hello(TOKEN))
            answer = protocol.receive(sock)
        except (EOFError, ConnectionError, protocol.FrameError):
            answer = None
        assert answer is None or answer.get("op") != "hello"


def test_untrusted_certificate_is_refused(tls: str) -> None:
    with pytest.raises(ConnectionError):
        Connection(parse(tls), token=TOKEN)  # the system CAs do not know the self-signed certificate


def test_remote_clients_cannot_name_store_paths(plain: str) -> None:
    connection = Connection(parse(plain), token=TOKEN)
    message = protocol.complete_request(0, DecodeRequest(PREFIX), ngrams={"stores": [{"path": "/etc", "weight": 1.0}]})
    _, future = connection.request(message)
    answer = future.result(timeout=30)
    assert answer["code"] == "bad_request" and "cannot read the client's stores" in answer["message"]
    connection.close()


@pytest.mark.parametrize("frame", [struct.pack(">I", 0xFFFFFFFF), struct.pack(">I", 0), struct.pack(">I", 4) + b"\xc1" * 4])
def test_bad_frames_after_hello_are_answered_and_closed(plain: str, frame: bytes) -> None:
    with _raw(plain) as sock:
        protocol.send(sock, protocol.hello(TOKEN))
        assert protocol.receive(sock)["ok"]
        sock.sendall(frame)
        assert protocol.receive(sock)["code"] == "bad_frame" and _closed(sock)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(max_size=300), authenticate=st.booleans(),
       message=st.dictionaries(st.sampled_from(["op", "id", "prompt", "options", "ngrams", "token", "version"]),
                               st.one_of(st.none(), st.integers(-(2**63), 2**64 - 1), st.text(max_size=20),  # msgpack's range
                                         st.lists(st.integers(-5, 10**6), max_size=5),
                                         st.sampled_from(["complete", "cancel", "status", "hello", "tokenizer"])),
                               max_size=6))
def test_fuzz_round_does_not_kill_the_engine(plain: str, garbage: bytes, authenticate: bool, message: dict) -> None:
    with _raw(plain) as sock:
        sock.settimeout(5)
        try:
            if authenticate:
                protocol.send(sock, protocol.hello(TOKEN))
                protocol.receive(sock)
                protocol.send(sock, message)
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except (OSError, EOFError, protocol.FrameError):
            pass
    connection = Connection(parse(plain), token=TOKEN)  # still serving
    _, future = connection.request({"op": "status"})
    assert future.result(timeout=30)["op"] == "status"
    connection.close()
