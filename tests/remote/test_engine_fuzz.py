"""A grammar-based fuzzer of the engine's msgpack frames against a real team engine (TCP, token,
tiny model): well-formed `complete`/`cancel`/`status`/`tokenizer` frames whose every field may be
hostile (wrong types, huge numbers, deep nesting, bad UTF-8, out-of-vocabulary ids, unknown
option keys, extreme option values). After each batch the engine must have answered every
request that had an id (or refused the frame and closed), and still answer `status`.

Fixed budget: `max_examples`, derandomized, no deadline (issue 24, item 1).
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spd_lsp.api import EXPERIMENTAL_FIELDS, DecodeOptions
from spd_lsp.remote import protocol
from spd_lsp.address import parse
from tests.engine_support import engine_env, start_engine

TOKEN = "fuzz-token-" + "y" * 24
ANSWER_S = 20.0  # the tiny model answers in well under a second; a hang fails
DEEP = "\x00deep"  # placeholders spliced into the packed bytes (msgpack itself packs neither)
BAD_UTF8 = "\x00utf8"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("fuzz-engine")
    token = directory / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    # --peer-limit 0: the rounds fail handshakes from this address, then connect to check the engine
    process, where = start_engine(["--tcp", "0", "--peer-limit", "0", "--token-file", str(token)], engine_env(directory))
    yield process, where
    process.kill()
    process.wait()


HUGE = st.sampled_from([2**63 - 1, -(2**63), 2**64 - 1, 10**9, 10**6, -1, 0, 1 << 31])
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([1e308, -1e308, 5e-324, -0.0])
SCALARS = st.none() | st.booleans() | HUGE | st.integers(-5, 300) | FLOATS | st.text(max_size=30) | st.binary(
    max_size=20) | st.sampled_from([DEEP, BAD_UTF8])
ANY = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=8), inner, max_size=4), max_leaves=12)

OPTION_VALUES = {
    "method": st.sampled_from(["superposed", "greedy", "nucleus", "beam", "nothing", ""]),
    "ngram_weights": st.dictionaries(st.sampled_from(["2", "3", "6", "-1", "x", "99999"]), ANY, max_size=3),
    "verify_first": st.sampled_from(["rank", "keep", "cut", "?"]),
    "verify_score": st.sampled_from(["mean", "total", "?"]),
    "verify_repair": st.sampled_from(["jacobi", "continue", "?"]),
}
EXPERIMENTAL = st.fixed_dictionaries({}, optional={
    name: OPTION_VALUES.get(name, st.integers(-3, 40) | st.floats(-2, 5) | HUGE | FLOATS | ANY)
    for name in EXPERIMENTAL_FIELDS} | {"bogus": ANY})
OPTIONS = st.fixed_dictionaries({}, optional={
    name: OPTION_VALUES.get(name, st.integers(-3, 40) | st.floats(-2, 5) | HUGE | FLOATS | ANY)
    for name in DecodeOptions().to_dict()} | {"bogus": ANY, "experimental": EXPERIMENTAL | ANY})
REQUEST = st.fixed_dictionaries({"prefix": st.text(max_size=60) | ANY}, optional={
    "ids": st.none() | st.lists(st.integers(-3, 600) | HUGE, max_size=30) | ANY,
    "suffix": st.text(max_size=40) | ANY, "filename": st.none() | st.text(max_size=20) | ANY,
    "snippets": st.lists(st.lists(st.text(max_size=20), min_size=2, max_size=2) | ANY, max_size=3) | ANY,
    "language": st.none() | st.sampled_from(["python", "rust", "?"]) | ANY,
    "prompt_format": st.sampled_from(["auto", "plain", "?"]) | ANY, "options": OPTIONS | ANY, "bogus": ANY,
})
NGRAMS = st.none() | ANY | st.fixed_dictionaries({}, optional={
    "stores": st.lists(st.fixed_dictionaries({"path": ANY | st.just("/etc"), "weight": ANY}), max_size=2) | ANY,
    "document": st.none() | ANY | st.fixed_dictionaries({"sequences": st.lists(st.lists(
        st.integers(-2, 600) | HUGE, max_size=20), max_size=3) | ANY, "weight": FLOATS | ANY}),
})
IDS = st.integers(0, 10**6) | HUGE | ANY
COMPLETE = st.fixed_dictionaries({"op": st.just("complete"), "id": IDS}, optional={
    "request": REQUEST | ANY, "prompt": ANY, "ngrams": NGRAMS, "affinity": ANY})
OTHER = st.fixed_dictionaries({"op": st.sampled_from(["cancel", "status", "tokenizer", "hello", "nope"]),
                               "id": IDS}, optional={"token": ANY, "version": ANY})
FRAMES = st.lists(COMPLETE | OTHER, min_size=1, max_size=4)


def _pack(message: dict[str, Any], depth: int) -> bytes:
    body = msgpack.packb(message, use_bin_type=True)
    body = body.replace(msgpack.packb(DEEP), b"\x91" * depth + b"\xc0")
    body = body.replace(msgpack.packb(BAD_UTF8), b"\xa2\xff\xfe")
    return struct.pack(">I", len(body)) + body


def _decodes(packed: bytes) -> bool:
    try:
        protocol.decode_body(packed[4:])
    except protocol.FrameError:
        return False
    return True


def _expects_answer(message: dict[str, Any], packed: bytes) -> bool:
    """Whether the engine owes this frame an answer carrying its id (a broken frame is answered by id None)."""
    msg_id = message["id"]
    if msgpack.packb(BAD_UTF8) in msgpack.packb(message, use_bin_type=True):
        return False
    return message["op"] in ("complete", "status", "tokenizer", "nope") and isinstance(msg_id, int) and not isinstance(
        msg_id, bool)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(frames=FRAMES, depth=st.sampled_from([3, 120, 600, 5000, 200_000]))
def test_engine_answers_every_hostile_frame_and_keeps_serving(engine: Any, frames: list[dict], depth: int) -> None:
    process, where = engine
    address = parse(where)
    with socket.create_connection((address.host, address.port), timeout=ANSWER_S) as sock:
        protocol.send(sock, protocol.hello(TOKEN))
        assert protocol.receive(sock)["ok"]
        owed: set[Any] = set()
        closed, decodable = False, True
        for message in frames:
            packed = _pack(message, depth)
            decodable = decodable and _decodes(packed)
            try:
                sock.sendall(packed)
            except OSError:
                closed = True  # an earlier frame was refused
                break
            if _expects_answer(message, packed):
                owed.add(message["id"])
        while (owed or not decodable) and not closed:
            try:
                answer = protocol.receive(sock)
            except EOFError:
                closed = True
                break
            if answer.get("code") == protocol.BAD_FRAME:
                closed = True  # refused (deep, bad UTF-8): the connection ends, by design
                break
            answered = answer.get("id")
            owed.discard(answered if isinstance(answered, int) else None)
        assert not owed or closed, f"unanswered ids {owed}"
        assert decodable or closed, "a frame msgpack cannot decode was not refused"
        assert not closed or not decodable, "the engine closed a connection over decodable frames"
    assert process.poll() is None, "the engine exited"
    with socket.create_connection((address.host, address.port), timeout=ANSWER_S) as sock:
        protocol.send(sock, protocol.hello(TOKEN))
        protocol.receive(sock)
        protocol.send(sock, {"op": "status", "id": 1})
        assert protocol.receive(sock)["op"] == "status"


@pytest.mark.parametrize("options", [
    {"max_tokens": 10**6, "stop_at_newline": False},  # held a batch row for minutes: no answer in 60 s
    {"k": 10**4}, {"k": -1}, {"experimental": {"candidate_pool": 10**7}},  # failed deep in the model as "internal"
    {"k": 2**63 - 1}, {"temperature": float("nan")}, {"alpha": float("inf")},
    {"ngram_weights": {"2": float("nan")}}, {"k": 17}, {"max_tokens": 257},  # past the settings' own bounds
    {"experimental": {"log_delta": float("-inf")}},
], ids=["max_tokens", "k-huge", "k-negative", "pool", "k-int64", "nan", "inf", "weight-nan", "k-17", "max_tokens-257",
        "experimental-inf"])
def test_costly_or_senseless_options_are_refused_up_front(engine: Any, options: dict[str, Any]) -> None:
    """Fuzzer finding (issue 24): the team engine ran whatever a client asked for."""
    _, where = engine
    address = parse(where)
    with socket.create_connection((address.host, address.port), timeout=ANSWER_S) as sock:
        protocol.send(sock, protocol.hello(TOKEN))
        protocol.receive(sock)
        protocol.send(sock, protocol.complete_request(7, {"prefix": "def f(x):\n    return", "options": options}))
        answer = protocol.receive(sock)
    assert (answer["op"], answer["id"], answer["code"]) == ("error", 7, "bad_request"), answer


def test_an_id_no_answer_can_carry_is_answered_with_none(engine: Any) -> None:
    _, where = engine
    address = parse(where)
    with socket.create_connection((address.host, address.port), timeout=ANSWER_S) as sock:
        protocol.send(sock, protocol.hello(TOKEN))
        protocol.receive(sock)
        sock.sendall(_pack({"op": "nope", "id": DEEP}, 600))
        assert protocol.receive(sock)["id"] is None
        protocol.send(sock, {"op": "status", "id": 2})  # the same connection still serves
        assert protocol.receive(sock)["id"] == 2
