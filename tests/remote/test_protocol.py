"""The engine's frames: round trips, and every kind of bad frame is a clear FrameError."""

from __future__ import annotations

import asyncio
import re
import socket
import struct

import msgpack
import pytest

from spd_lsp.api import DecodeOptions, DecodeRequest, DecodeResult, Draft, PromptContext, Timings
from spd_lsp.remote import protocol


def _pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair()


def test_round_trip_over_a_socket() -> None:
    a, b = _pair()
    options = DecodeOptions.of(k=4, seed=7, ngram_weights={2: 0.5, 4: 0.25})
    request = DecodeRequest("def f(", options, ids=(1, 2), context=PromptContext(suffix="):", filename="f.py",
                            snippets=(("g.py", "def g(): pass\n"),), language="python"), prompt_format="fim")
    message = protocol.complete_request(3, request, ngrams={"stores": [{"path": "/x", "weight": 1.0}], "document": None})
    protocol.send(a, message)
    got = protocol.receive(b)
    assert got == message
    assert protocol.read_request(got) == request  # the session's request, unchanged


@pytest.mark.parametrize("frame, complaint", [
    ({"prompt": {"prefix": "x", "ids": None, "args": {"suffix": ")"}}, "options": {}}, "version 1"),
    ({"request": {"prefix": "x", "options": {"experimental": {"colour": 1}}}}, "unknown experimental decode options: colour"),
    ({"request": {"prefix": "x", "options": {"experimental": {"seed": "7"}}}}, "wrong type"),
    ({"request": {"ids": [1]}}, "string 'prefix'"),
    ({"request": {"prefix": "x", "ids": ["a"]}}, "token ids"),
    ({"request": {"prefix": "x", "snippets": [["a.py"]]}}, "[path, code]"),
    ({"request": {"prefix": "x", "options": {"k": "three"}}}, "wrong type"),
])
def test_a_malformed_or_version_1_request_is_refused_saying_why(frame: dict, complaint: str) -> None:
    with pytest.raises(protocol.ProtocolError, match=re.escape(complaint)) as refused:
        protocol.read_request({"op": protocol.COMPLETE, "id": 1, **frame})
    assert refused.value.code == protocol.BAD_REQUEST


def test_result_and_timings_round_trip() -> None:
    timings = Timings(prefill_s=0.5, steps=3)
    message = protocol.result(1, DecodeResult([Draft("x)", [5, 6], -0.25, finished=True)], timings, "superposed"))
    got = protocol.decode_body(protocol.encode(message)[4:])
    assert got["drafts"] == [{"text": "x)", "token_ids": [5, 6], "score": -0.25, "finished": True}]
    assert Timings.from_dict({**got["timings"], "future_phase_s": 1.0}) == timings


@pytest.mark.parametrize(
    "frame, complaint",
    [
        (struct.pack(">I", 0), "empty"),
        (struct.pack(">I", protocol.MAX_FRAME_BYTES + 1), "exceeds"),
        (struct.pack(">I", 3) + b"\xc1\xc1\xc1", "not msgpack"),
        (struct.pack(">I", 2) + msgpack.packb([1]), "map"),
        (struct.pack(">I", 10) + msgpack.packb({"op": 5, "a": 1}).ljust(10, b"\x00"), "not msgpack|map"),
    ],
)
def test_bad_frames_are_frame_errors(frame: bytes, complaint: str) -> None:
    a, b = _pair()
    a.sendall(frame)
    with pytest.raises(protocol.FrameError, match=complaint):
        protocol.receive(b)


def test_oversized_outgoing_frame_is_refused() -> None:
    with pytest.raises(protocol.FrameError, match="exceeds"):
        protocol.encode({"op": "complete", "blob": "x" * 100}, max_bytes=50)


def test_closed_mid_frame_is_eof() -> None:
    a, b = _pair()
    a.sendall(struct.pack(">I", 100) + b"\x81")
    a.close()
    with pytest.raises(EOFError):
        protocol.receive(b)


def test_asyncio_reader_matches_the_blocking_one() -> None:
    async def main() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(protocol.encode(protocol.hello("t" * 20)) + struct.pack(">I", 0))
        reader.feed_eof()
        assert await protocol.read(reader) == {"op": "hello", "version": 2, "token": "t" * 20}
        with pytest.raises(protocol.FrameError):
            await protocol.read(reader)

    asyncio.run(main())


def test_bad_decode_options_name_the_problem() -> None:
    with pytest.raises(ValueError, match="unknown experimental decode options: colour"):
        DecodeOptions.from_dict({"experimental": {"colour": 1}})
    with pytest.raises(ValueError, match="k='3'"):
        DecodeOptions.from_dict({"k": "3"})
    with pytest.raises(ValueError, match="verify_first='sideways'"):
        DecodeOptions.from_dict({"experimental": {"verify_first": "sideways"}})


def test_only_experimental_options_set_away_from_their_defaults_travel() -> None:
    assert "experimental" not in DecodeOptions().to_dict()  # the product's request: its options alone
    assert set(DecodeOptions().to_dict()) == {"method", "k", "max_tokens", "temperature", "alpha", "ngram_weights",
                                              "stop_at_newline", "verify_rounds", "verify_repair"}
    studied = DecodeOptions.of(k=2, seed=3, heal=False, verify_first="cut")  # "cut" is the default: it stays home
    assert studied.to_dict()["experimental"] == {"seed": 3, "heal": False}
    assert DecodeOptions.from_dict(studied.to_dict()) == studied


def test_fields_an_engine_does_not_know_are_ignored_and_named() -> None:
    """The compatibility rule (protocol.py): a newer front end's optional fields reach an older engine as nothing."""
    wire = {"prefix": "x", "colour": "red", "options": {"k": 2, "verify_packed": False, "future_option": 1}}
    message = {"op": protocol.COMPLETE, "id": 1, "request": wire}
    assert protocol.read_request(message) == DecodeRequest("x", DecodeOptions(k=2))
    assert protocol.ignored(message) == ["colour", "options.future_option", "options.verify_packed"]
    answer = protocol.result(1, DecodeResult([], Timings(), "superposed"), ignored=protocol.ignored(message))
    assert answer["ignored"] == ["colour", "options.future_option", "options.verify_packed"]
    assert "ignored" not in protocol.result(1, DecodeResult([], Timings(), "superposed"))


def test_options_split_into_the_products_and_the_experimental_ones() -> None:
    options = DecodeOptions.of(k=4, seed=7, verify_top=3)
    assert (options.k, options.experimental.seed, options.experimental.verify_top) == (4, 7, 3)
    assert options.but(max_tokens=5, heal=False).flat() == {**options.flat(), "max_tokens": 5, "heal": False}
    with pytest.raises(TypeError, match="verify_packed"):
        DecodeOptions.of(verify_packed=False)  # retired: verification always runs the drafts as one prefix tree


def test_the_engines_tokenizer_travels_and_tokenizes_alike() -> None:
    from spd_lsp.remote.tokenizer import from_wire, to_wire
    from spd_lsp.tokens import encode_texts, tokenizer_identity
    from tests.tiny_models import CORPUS, tiny_tokenizer

    original = tiny_tokenizer()
    copy = from_wire(protocol.decode_body(protocol.encode({"op": "tokenizer", **to_wire(original)})[4:]))
    texts = CORPUS[:4] + ["héllo wörld 🎉", "", "  \n\t"]
    for text in texts:
        assert copy.encode(text, add_special_tokens=False) == original.encode(text, add_special_tokens=False)
        spans = original(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
        assert copy(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"] == spans
    assert encode_texts(copy, texts) == encode_texts(original, texts)
    assert tokenizer_identity(copy) == tokenizer_identity(original)  # the workspace stores stay valid
    assert (copy.eos_token_id, len(copy)) == (original.eos_token_id, len(original))
